// The planner on a 2 x 8 H100 cluster.
#include <gtest/gtest.h>

#include <set>

#include "core/planner.h"

using namespace meshwork;

namespace {

PlanQuery cluster_2x8(const std::string& model = "llama-3.1-8b") {
  PlanQuery q;
  q.model = *load_model_spec(model);
  q.nodes = 2;
  q.gpus_per_node = 8;
  q.device_memory_bytes = 80LL << 30;
  q.training.seq_len = 8192;
  q.training.micro_batch = 1;
  q.training.precision = Precision::bf16;
  q.training.device = DeviceKind::cuda;
  return q;
}

}  // namespace

TEST(Planner, EnumeratesEveryFactorization) {
  // 16 = 2^4 over 4 ordered axes: C(4+3, 3) = 35 shapes.
  EXPECT_EQ(enumerate_shapes(16, {0, 0, 0, 0}).size(), 35u);
  // tp fixed to 2: 8 over 3 axes: C(3+2, 2) = 10.
  auto tp2 = enumerate_shapes(16, {0, 0, 0, 2});
  EXPECT_EQ(tp2.size(), 10u);
  for (const auto& s : tp2) EXPECT_EQ(s[Axis::tp], 2);
  EXPECT_EQ(enumerate_shapes(16, {2, 4, 1, 2}), (std::vector<MeshShape>{{2, 4, 1, 2}}));
  EXPECT_TRUE(enumerate_shapes(16, {3, 0, 0, 0}).empty());
  std::set<std::string> unique;
  for (const auto& s : enumerate_shapes(12, {0, 0, 0, 0})) {
    EXPECT_EQ(s.world_size(), 12);
    unique.insert(s.compact());
  }
  EXPECT_EQ(unique.size(), 40u);  // 12 = 2^2 x 3: C(2+3,3) x C(1+3,3) = 10 x 4
}

TEST(Planner, Llama8BOnTwoNodesOfEight) {
  auto plan = make_plan(cluster_2x8());
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->world_size, 16);
  EXPECT_EQ(plan->model_params, 8'030'261'248);
  // All 35 factorizations: meshtrain runs tp/cp with pure replication, so the 9 that do
  // (dp_replicate 2 with cp*tp = 8: 4 ways; 4 with 4: 3 ways; 8 with 2: 2 ways) are planned and
  // marked with Accelerate's reason instead of being refused.
  EXPECT_EQ(plan->shapes.size(), 35u);
  EXPECT_EQ(plan->rejected.size(), 0u);
  int marked = 0;
  for (const auto& e : plan->shapes) {
    const bool pure_with_tp_cp = e.shape[Axis::dp_replicate] > 1 && e.shape[Axis::dp_shard] == 1 &&
                                 (e.shape[Axis::tp] > 1 || e.shape[Axis::cp] > 1);
    EXPECT_EQ(!e.accelerate_refusal.empty(), pure_with_tp_cp) << e.shape.compact();
    marked += pure_with_tp_cp;
  }
  EXPECT_EQ(marked, 9);
  ASSERT_TRUE(plan->any_fits());
  // Ranked: every fitting shape before every other, tokens/s descending within each group.
  bool seen_no_fit = false;
  for (size_t i = 0; i < plan->shapes.size(); ++i) {
    const auto& e = plan->shapes[i];
    if (!e.fits) seen_no_fit = true;
    EXPECT_FALSE(seen_no_fit && e.fits) << "fitting shape after a non-fitting one at " << i;
    EXPECT_EQ(e.fits, e.memory.total() <= (80LL << 30));
    if (i > 0 && plan->shapes[i - 1].fits == e.fits) {
      EXPECT_GE(plan->shapes[i - 1].time.tokens_per_s, e.time.tokens_per_s);
    }
  }
  const PlanEntry& best = plan->shapes.front();
  EXPECT_TRUE(best.fits);
  // 8B on 16 GPUs does not need tp across nodes: the best shape keeps tp inside a node.
  EXPECT_LE(best.shape[Axis::tp], 8);
  // Pure replication keeps a full fp32 model, grads and AdamW state (16 B x 8.03e9 = 120 GiB):
  // it must not fit 80 GiB.
  for (const auto& e : plan->shapes) {
    if (e.shape == MeshShape{16, 1, 1, 1}) {
      EXPECT_FALSE(e.fits);
      EXPECT_GT(e.memory.params + e.memory.grads + e.memory.optimizer, 16 * 8'030'261'248LL - 1);
    }
  }
  // tp = 16 spans both nodes and replicates the 8 kv heads: two warnings, inter-node comm.
  for (const auto& e : plan->shapes) {
    if (e.shape[Axis::tp] == 16) {
      EXPECT_EQ(e.warnings.size(), 2u);
      EXPECT_TRUE(e.time.axis(Axis::tp).crosses_nodes);
      EXPECT_LT(e.time.tokens_per_s, best.time.tokens_per_s);
    }
  }
}

TEST(Planner, FixedAxesStayFixed) {
  PlanQuery q = cluster_2x8();
  q.fixed[Axis::tp] = 2;
  auto plan = make_plan(q);
  ASSERT_TRUE(plan.ok());
  // The 10 factorizations of 16 with tp = 2 (meshtrain runs pure replication with tp too).
  EXPECT_EQ(plan->shapes.size(), 10u);
  for (const auto& e : plan->shapes) EXPECT_EQ(e.shape[Axis::tp], 2);
}

TEST(Planner, FullyGivenShape) {
  PlanQuery q = cluster_2x8();
  q.fixed = {2, 4, 1, 2};
  auto plan = make_plan(q);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->shapes.size(), 1u);
  EXPECT_EQ(plan->shapes[0].shape, (MeshShape{2, 4, 1, 2}));

  q.fixed = {2, 1, 1, 8};  // tp with pure replication: planned for meshtrain, marked
  auto marked = make_plan(q);
  ASSERT_TRUE(marked.ok());
  ASSERT_EQ(marked->shapes.size(), 1u);
  EXPECT_FALSE(marked->shapes[0].accelerate_refusal.empty());
  q.trainer.tp_cp_with_pure_replication = false;  // a trainer that cannot: refused
  auto bad = make_plan(q);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "dp_shard");
  q.trainer = {};

  q.fixed = {3, 0, 0, 0};  // does not divide 16
  auto indivisible = make_plan(q);
  ASSERT_FALSE(indivisible.ok());
  EXPECT_EQ(indivisible.error().field, "mesh");
}

TEST(Planner, NothingFitsIsValidButEmptyOfFits) {
  PlanQuery q = cluster_2x8("llama-3.1-405b");
  auto plan = make_plan(q);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->any_fits());  // 405B x 16 B / 16 ranks = 380 GiB of state alone
}

TEST(Planner, InvalidInput) {
  PlanQuery q = cluster_2x8();
  q.nodes = 0;
  EXPECT_EQ(make_plan(q).error().field, "nodes");
  q = cluster_2x8();
  q.device_memory_bytes = 0;
  EXPECT_EQ(make_plan(q).error().field, "gpu_memory");
  q = cluster_2x8();
  q.training.global_batch = 12;  // no dp size in {1,2,4,8,16} with 12 % dp == 0 except 1,2,4
  auto plan = make_plan(q);
  ASSERT_TRUE(plan.ok());
  for (const auto& e : plan->shapes)
    EXPECT_EQ(12 % (e.shape[Axis::dp_replicate] * e.shape[Axis::dp_shard]), 0) << e.shape.compact();
}

TEST(Planner, JsonSchema) {
  auto plan = make_plan(cluster_2x8());
  ASSERT_TRUE(plan.ok());
  nlohmann::json j = plan_to_json(*plan);
  EXPECT_EQ(j["world_size"], 16);
  EXPECT_EQ(j["model"]["name"], "llama-3.1-8b");
  EXPECT_EQ(j["model"]["params"], 8'030'261'248);
  ASSERT_EQ(j["shapes"].size(), 35u);
  const auto& s = j["shapes"][0];
  for (const char* key : {"dp_replicate", "dp_shard", "cp", "tp", "fits", "memory_bytes",
                          "step_time_s", "tokens_per_s", "mfu", "comm_s", "warnings", "accelerate", "compute_s", "calibrated"})
    EXPECT_TRUE(s.contains(key)) << key;
  for (const char* key :
       {"params", "grads", "optimizer", "activations", "buffers", "reserve", "total"})
    EXPECT_TRUE(s["memory_bytes"][key].is_number_integer()) << key;
  for (const char* key : {"dp_replicate", "dp_shard", "cp", "tp"})
    EXPECT_TRUE(s["comm_s"][key].is_number()) << key;
  EXPECT_EQ(s["dp_replicate"].get<int>() * s["dp_shard"].get<int>() * s["cp"].get<int>() *
                s["tp"].get<int>(),
            16);
  EXPECT_TRUE(s["warnings"].is_array());
}
