// Expert parallelism's dispatch and combine (trainer/parallelize_ep.h) between real Gloo ranks
// (threads of this process): the outputs and every gradient equal those of all experts run
// locally, with uneven splits and experts nobody routes to; the all-to-alls are charged to
// comm_s.ep.
#include <gtest/gtest.h>

#include <vector>

#include <torch/torch.h>

#include "run_ranks.h"
#include "trainer/moe.h"
#include "trainer/parallelize_ep.h"

namespace meshwork::trainer {
namespace {

TEST(ExpertParallel, AllToAllWithUnevenSplitsIsChargedToEp) {
  MeshShape shape{1, 4, 1, 1};
  shape.ep = 4;
  run_ranks(shape, [](Communicator& c) {
    const Group& g = c.expert_group(ExpertGroupKind::ep);
    ASSERT_EQ(g.size(), 4);
    // Member i sends j + 1 rows of value 10 i + j to member j.
    std::vector<int64_t> in_splits, out_splits;
    std::vector<at::Tensor> blocks;
    for (int j = 0; j < 4; ++j) {
      in_splits.push_back(j + 1);
      out_splits.push_back(g.rank + 1);
      blocks.push_back(at::full({j + 1, 3}, 10.0 * g.rank + j, at::kDouble));
    }
    at::Tensor out = at::empty({4 * (g.rank + 1), 3}, at::kDouble);
    c.times().reset();
    c.all_to_all(out, at::cat(blocks), out_splits, in_splits, g);
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < g.rank + 1; ++k)
        ASSERT_EQ(out[i * (g.rank + 1) + k][2].item<double>(), 10.0 * i + g.rank);
    ASSERT_GT(c.times().ep, 0.0);
    ASSERT_EQ(c.times().total(), c.times().ep);
  });
}

// ep 2 over dp_shard 4: each rank routes its own rows (different counts per rank, expert 3 none
// on rank 0) to experts held two per rank; compared with the four experts run locally.
TEST(ExpertParallel, DispatchCombineEqualsLocalExpertsWithGradients) {
  MeshShape shape{1, 4, 1, 1};
  shape.ep = 2;
  run_ranks(shape, [](Communicator& c) {
    const int64_t E = 4, H = 6, I = 5;
    const Group& ep = c.expert_group(ExpertGroupKind::ep);
    auto weights = at::TensorOptions().dtype(at::kDouble);
    // Each rank thread draws from a generator of its own: the global one is shared by the
    // threads, so seeding it here would let another rank's draws interleave with this rank's.
    at::Generator same = at::make_generator<at::CPUGeneratorImpl>(7);  // the same experts on every rank
    at::Tensor gate = at::randn({E, I, H}, same, weights), up = at::randn({E, I, H}, same, weights),
               down = at::randn({E, H, I}, same, weights);
    at::Generator own = at::make_generator<at::CPUGeneratorImpl>(100 + c.rank());  // each rank its own rows
    std::vector<int64_t> counts = {2 + c.rank(), 0, 3, c.rank() == 0 ? 0 : c.rank()};
    int64_t M = 0;
    for (int64_t n : counts) M += n;
    at::Tensor rows = at::randn({M, H}, own, weights), upstream = at::randn({M, H}, own, weights);

    // Locally, all experts.
    at::Tensor x_ref = rows.clone().requires_grad_(true);
    at::Tensor g_ref = gate.clone().requires_grad_(true), u_ref = up.clone().requires_grad_(true),
               d_ref = down.clone().requires_grad_(true);
    at::Tensor y_ref = run_grouped_experts(x_ref, counts, g_ref, u_ref, d_ref);
    (y_ref * upstream).sum().backward();

    // Expert parallel: this ep rank's two experts.
    const int64_t lo = ep.rank * (E / 2);
    at::Tensor x = rows.clone().requires_grad_(true);
    at::Tensor g = gate.narrow(0, lo, 2).clone().requires_grad_(true),
               u = up.narrow(0, lo, 2).clone().requires_grad_(true),
               d = down.narrow(0, lo, 2).clone().requires_grad_(true);
    c.times().reset();
    at::Tensor y = expert_parallel_experts(c, x, counts, g, u, d);
    (y * upstream).sum().backward();
    ASSERT_GT(c.times().ep, 0.0);

    ASSERT_TRUE(at::allclose(y, y_ref, 1e-12, 1e-12));
    ASSERT_TRUE(at::allclose(x.grad(), x_ref.grad(), 1e-12, 1e-12));
    // An expert's gradient sums the rows every ep peer sent it: the local references' sum.
    for (auto [mine, ref] : {std::pair{g, g_ref}, std::pair{u, u_ref}, std::pair{d, d_ref}}) {
      at::Tensor total = ref.grad().contiguous();
      c.all_reduce(total, ep);
      ASSERT_TRUE(at::allclose(mine.grad(), total.narrow(0, lo, 2), 1e-11, 1e-11));
    }
  });
}

}  // namespace
}  // namespace meshwork::trainer
