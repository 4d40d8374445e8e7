// Real Gloo collectives between ranks that are threads of this process (each its own
// Communicator, TCPStore client and Gloo connections over loopback TCP).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "run_ranks.h"
#include "trainer/comm.h"

namespace meshwork::trainer {
namespace {



TEST(Comm, AllReduceAndGatherFollowCoreGroups) {
  MeshShape shape{2, 2, 1, 1};
  run_ranks(shape, [](Communicator& c) {
    at::Tensor t = at::full({3}, static_cast<float>(c.rank() + 1));
    c.all_reduce(t, GroupKind::dp_shard);
    // dp_shard groups (core): {0,1} and {2,3}.
    const auto& members = c.group(GroupKind::dp_shard).members;
    float expect = 0;
    for (int m : members) expect += m + 1;
    ASSERT_FLOAT_EQ(t[0].item<float>(), expect);

    at::Tensor mine = at::full({2}, static_cast<float>(c.rank()));
    at::Tensor all = at::empty({4});
    c.all_gather(all, mine, GroupKind::dp_replicate);
    const auto& rep = c.group(GroupKind::dp_replicate).members;
    for (int i = 0; i < 2; ++i) ASSERT_FLOAT_EQ(all[2 * i].item<float>(), rep[i]);

    at::Tensor m = at::full({1}, static_cast<float>(c.rank()));
    c.all_reduce(m, c.world(), /*max=*/true);
    ASSERT_FLOAT_EQ(m.item<float>(), 3.0f);
    ASSERT_GT(c.times().seconds[Axis::dp_shard], 0.0);
    ASSERT_GT(c.times().seconds[Axis::dp_replicate], 0.0);
    ASSERT_EQ(c.times().seconds[Axis::tp], 0.0);
  });
}

void check_reduce_scatter(ReduceScatterImpl impl) {
  MeshShape shape{1, 4, 1, 1};
  run_ranks(shape, [](Communicator& c) {
    // Member i contributes in[j] = 100 * i + j; chunk k of the sum over i has
    // elements sum_i (100 i + j) = 600 + 4 j for j in chunk k.
    at::Tensor in = at::arange(8, at::kFloat) + 100.0f * c.group_rank(GroupKind::dp_shard);
    at::Tensor out = at::empty({2});
    c.reduce_scatter(out, in, GroupKind::dp_shard);
    const int k = c.group_rank(GroupKind::dp_shard);
    for (int e = 0; e < 2; ++e) ASSERT_FLOAT_EQ(out[e].item<float>(), 600.0f + 4 * (2 * k + e));
  }, impl);
}

TEST(Comm, ReduceScatterAllToAllPlusLocalSum) { check_reduce_scatter(ReduceScatterImpl::alltoall); }
TEST(Comm, ReduceScatterGlooNative) { check_reduce_scatter(ReduceScatterImpl::native); }

TEST(Comm, RingSendRecvAndFlattenedCharge) {
  MeshShape shape{2, 2, 1, 1};
  run_ranks(shape, [](Communicator& c) {
    const Group& g = c.group(GroupKind::dp);  // flattened dp_replicate x dp_shard, 4 members
    const int n = g.size();
    at::Tensor send = at::full({4}, static_cast<float>(g.rank));
    at::Tensor recv = at::empty({4});
    c.times().reset();
    c.send_recv(send, (g.rank + 1) % n, recv, (g.rank + n - 1) % n, g);
    ASSERT_FLOAT_EQ(recv[0].item<float>(), static_cast<float>((g.rank + n - 1) % n));
    // A flattened group is charged to its axes of size > 1 in proportion to (size - 1): 1:1.
    auto s = c.times().seconds;
    ASSERT_GT(s[Axis::dp_replicate], 0.0);
    ASSERT_NEAR(s[Axis::dp_replicate], s[Axis::dp_shard], 1e-12);
    ASSERT_EQ(s[Axis::cp] + s[Axis::tp] + s[Axis::pp], 0.0);
  });
}

}  // namespace
}  // namespace meshwork::trainer
