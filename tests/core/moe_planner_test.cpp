// The planner with expert parallel: ep enumerated (auto) or fixed, every listed degree valid,
// dense models kept at ep 1, and the first choice explained in words.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/planner.h"

using namespace meshwork;

namespace {

ModelSpec preset(const std::string& name) {
  auto spec = load_model_spec(name);
  EXPECT_TRUE(spec.ok()) << name;
  return *spec;
}

PlanQuery query(const ModelSpec& m, int nodes) {
  PlanQuery q;
  q.model = m;
  q.nodes = nodes;
  q.gpus_per_node = 8;
  q.device_memory_bytes = int64_t{80} << 30;
  q.training.seq_len = 4096;
  q.training.micro_batch = 1;
  return q;
}

}  // namespace

TEST(MoePlanner, ExpertDegreesDivideExpertsAndTheBlock) {
  const ModelSpec moe = preset("qwen3-30b-a3b"), mixtral = preset("mixtral-8x7b"), dense = preset("qwen3-8b");
  EXPECT_EQ(expert_degrees(MeshShape{1, 8, 1, 2}, 0, moe), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(expert_degrees(MeshShape{1, 32, 1, 1}, 0, mixtral), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(expert_degrees(MeshShape{1, 3, 1, 1}, 0, moe), (std::vector<int>{1}));
  EXPECT_EQ(expert_degrees(MeshShape{1, 8, 1, 1}, 0, dense), (std::vector<int>{1}));
  EXPECT_EQ(expert_degrees(MeshShape{1, 8, 1, 1}, 4, moe), (std::vector<int>{4}));
}

TEST(MoePlanner, RanksExpertParallelShapesWithTheRest) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  auto plan = make_plan(query(m, 4));
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  int with_ep = 0;
  for (const PlanEntry& e : plan->shapes) {
    EXPECT_EQ(e.shape.expert_block_size() % e.shape.ep, 0);
    EXPECT_EQ(m.moe.num_experts % e.shape.ep, 0);
    if (e.shape.ep > 1) {
      ++with_ep;
      EXPECT_GT(e.time.comm_ep.seconds, 0.0);
    }
  }
  EXPECT_GT(with_ep, 0);
  EXPECT_TRUE(plan->any_fits());
  const nlohmann::json j = plan_to_json(*plan);
  bool json_ep = false;
  for (const auto& s : j["shapes"])
    if (s.contains("ep")) json_ep = json_ep || (s["comm_s"].contains("ep") && s["efsdp"].get<int>() >= 1);
  EXPECT_TRUE(json_ep);
  const std::string why = explain_first(*plan, int64_t{80} << 30);
  EXPECT_EQ(why.rfind("#1 " + plan->shapes.front().shape.to_string() + ": fits", 0), 0u) << why;
}

TEST(MoePlanner, FixedEpAndDenseModels) {
  PlanQuery q = query(preset("qwen3-30b-a3b"), 1);
  q.fixed.ep = 8;
  auto plan = make_plan(q);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  for (const PlanEntry& e : plan->shapes) EXPECT_EQ(e.shape.ep, 8);

  PlanQuery dense = query(preset("qwen3-8b"), 1);
  auto auto_plan = make_plan(dense);
  ASSERT_TRUE(auto_plan.ok());
  for (const PlanEntry& e : auto_plan->shapes) EXPECT_EQ(e.shape.ep, 1);
  dense.fixed.ep = 2;
  auto refused = make_plan(dense);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "ep");
  EXPECT_NE(refused.error().message().find("dense model"), std::string::npos) << refused.error().message();
}

// qwen3-235b-a22b cannot fit 32 ranks of 80 GiB whatever the shape: 16 B x 235 B parameters over
// 32 ranks is 110 GiB each before any activation. The plan lists its EP shapes and says so.
TEST(MoePlanner, ExplainsWhyNothingFits) {
  PlanQuery q = query(preset("qwen3-235b-a22b"), 4);
  q.training.activation_checkpointing = ActivationCheckpointing::full;
  auto plan = make_plan(q);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_FALSE(plan->any_fits());
  EXPECT_TRUE(std::any_of(plan->shapes.begin(), plan->shapes.end(), [](const PlanEntry& e) { return e.shape.ep > 1; }));
  const std::string why = explain_first(*plan, q.device_memory_bytes);
  EXPECT_NE(why.find("nothing fits in 80.0 GiB per rank"), std::string::npos) << why;
  EXPECT_NE(why.find("plan more nodes"), std::string::npos) << why;
}
