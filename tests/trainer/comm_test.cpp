// Real Gloo collectives between ranks that are threads of this process (each its own
// Communicator, TCPStore client and Gloo connections over loopback TCP).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
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

// Threads of this process named `name` (Linux: /proc/self/task/*/comm).
int threads_named(const std::string& name) {
  int n = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) {
    std::ifstream comm(it->path() / "comm");
    std::string got;
    if (std::getline(comm, got) && got == name) ++n;
  }
  return n;
}

// Every process group shares one Gloo device per address: one event loop thread, which wakes
// every 10 ms, instead of one per group (trainer/comm.cpp, gloo_device). Here 4 ranks x their
// groups (dp_replicate, dp_shard, dp, dp_cp, world...) and a second communicator per rank, all
// alive at once, and all collectives still right.
TEST(Comm, EveryGroupSharesOneGlooDevice) {
  std::atomic<int> loops{-1};
  run_ranks(MeshShape{2, 2, 1, 1}, [&](Communicator& c, const CommOptions& first) {
    CommOptions o = first;
    o.shape = MeshShape{1, 1, 1, 4};
    o.host_store = false;
    o.group_prefix = "second";
    auto second = Communicator::create(o);
    ASSERT_TRUE(second.ok()) << second.error().message();
    c.barrier(c.world());  // every rank's groups of both communicators exist
    if (c.rank() == 0) loops = threads_named("gloo_tcp_loop");
    at::Tensor t = at::full({1}, static_cast<float>(c.rank() + 1));
    (*second)->all_reduce(t, GroupKind::tp);
    ASSERT_FLOAT_EQ(t.item<float>(), 10.0f);
    at::Tensor u = at::full({1}, static_cast<float>(c.rank() + 1));
    c.all_reduce(u, GroupKind::dp_shard);
    float expect = 0;
    for (int m : c.group(GroupKind::dp_shard).members) expect += static_cast<float>(m + 1);
    ASSERT_FLOAT_EQ(u.item<float>(), expect);
    (*second)->barrier((*second)->world());  // every rank done with the second before it goes
  });
  EXPECT_EQ(loops.load(), 1);
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
