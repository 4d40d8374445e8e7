// The measured routing imbalance (core/routing_imbalance.h): gamma per ep from tokens per expert,
// worked by hand on a small example; the checks that refuse a measurement of another model; and
// the planner taking each ep shape's imbalance from it.
#include <gtest/gtest.h>

#include "core/planner.h"
#include "core/routing_imbalance.h"

using namespace meshwork;

namespace {

// Two sparse layers of 4 experts. Step 0 routes layer 0 to the first experts and layer 1 to the
// last; step 1 routes nothing; step 2 is even.
std::vector<RoutedStep> example() {
  return {RoutedStep{{{6, 2, 1, 1}, {1, 1, 2, 6}}}, RoutedStep{{{0, 0, 0, 0}, {0, 0, 0, 0}}},
          RoutedStep{{{3, 3, 3, 3}, {3, 3, 3, 3}}}};
}

ModelSpec small_moe() {
  auto spec = load_model_spec("qwen3-30b-a3b");
  EXPECT_TRUE(spec.ok());
  return *spec;
}

}  // namespace

TEST(RoutingImbalance, EachEpByHand) {
  auto r = MeasuredRouting::make(example(), "run 7");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->num_experts(), 4);
  EXPECT_EQ(r->sparse_layers(), 2);
  EXPECT_EQ(r->steps(), 3);
  EXPECT_EQ(r->source(), "run 7");
  // ep 2, step 0: blocks {8, 2} and {2, 8}: each layer's busiest 8 against a mean of 5, so
  // (8 + 8) / (5 + 5) = 1.6; step 2: 1; step 1 routed nothing and is not counted: (1.6 + 1) / 2.
  EXPECT_DOUBLE_EQ(r->step_imbalance(2), 1.3);
  // Memory: rank 0 holds 8 + 2 = 10 over both layers, rank 1 2 + 8 = 10: even, in every step.
  EXPECT_DOUBLE_EQ(r->memory_imbalance(2), 1.0);
  // ep 4, step 0: (6 + 6) / (2.5 + 2.5) = 2.4, mean with step 2's 1: 1.7. Memory: the ranks hold
  // 7, 3, 3, 7 of a mean of 5 in step 0: 1.4 (the worst step).
  EXPECT_DOUBLE_EQ(r->step_imbalance(4), 1.7);
  EXPECT_DOUBLE_EQ(r->memory_imbalance(4), 1.4);
  // No split, or none that divides the experts: nothing to wait for.
  EXPECT_EQ(r->step_imbalance(1), 1.0);
  EXPECT_EQ(r->memory_imbalance(3), 1.0);
}

TEST(RoutingImbalance, BadMeasurementsAreNamed) {
  auto none = MeasuredRouting::make({}, "run 3");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("run 3"), std::string::npos);
  auto ragged = MeasuredRouting::make({RoutedStep{{{1, 2, 3, 4}}}, RoutedStep{{{1, 2, 3}}}}, "run 3");
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(ragged.error().field, "routing.experts");
  EXPECT_NE(ragged.error().message().find("step 1: 3 experts"), std::string::npos);
  auto layers = MeasuredRouting::make({RoutedStep{{{1, 2}, {3, 4}}}, RoutedStep{{{1, 2}}}}, "run 3");
  ASSERT_FALSE(layers.ok());
  EXPECT_EQ(layers.error().field, "routing.layers");
  auto negative = MeasuredRouting::make({RoutedStep{{{1, -2}}}}, "run 3");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().field, "routing.tokens");
}

TEST(RoutingImbalance, AMeasurementOfAnotherModelIsRefused) {
  auto r = MeasuredRouting::make(example(), "run 7");
  ASSERT_TRUE(r.ok());
  auto dense = load_model_spec("qwen3-8b");
  ASSERT_TRUE(dense.ok());
  Status d = r->check_matches(*dense);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("dense"), std::string::npos);
  Status e = r->check_matches(small_moe());  // 128 experts
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("4 experts"), std::string::npos);
  EXPECT_NE(e.error().message().find("128 experts"), std::string::npos);
}

// The planner's ep shapes take gamma of their own ep: their estimate equals one made with
// MemoryModel::moe_imbalance set to that gamma by hand (memory's gamma for the memory, the
// step's for the time), and the ep 1 shapes are untouched.
TEST(RoutingImbalance, ThePlannerGivesEachEpShapeItsOwnGamma) {
  const ModelSpec m = small_moe();
  // 128 experts in 4 blocks of 32 for ep 4, 2 of 64 for ep 2: expert e gets 1 + e copies.
  std::vector<double> tokens(128);
  for (int e = 0; e < 128; ++e) tokens[static_cast<size_t>(e)] = 1.0 + e;
  RoutedStep step;
  step.layers.assign(static_cast<size_t>(m.sparse_layer_count()), tokens);
  auto routing = MeasuredRouting::make({step}, "run 1");
  ASSERT_TRUE(routing.ok());
  ASSERT_GT(routing->step_imbalance(4), routing->step_imbalance(2));
  ASSERT_GT(routing->step_imbalance(2), 1.0);

  PlanQuery q;
  q.model = m;
  q.nodes = 1;
  q.gpus_per_node = 8;
  q.device_memory_bytes = int64_t{80} << 30;
  q.training.seq_len = 4096;
  q.training.micro_batch = 1;
  q.fixed = MeshShape{1, 8, 1, 1};
  q.fixed.ep = 0;
  auto balanced = make_plan(q);
  ASSERT_TRUE(balanced.ok()) << balanced.error().message();
  q.estimate.routing = std::make_shared<const MeasuredRouting>(*routing);
  auto measured = make_plan(q);
  ASSERT_TRUE(measured.ok()) << measured.error().message();
  EXPECT_EQ(measured->routing_source, "run 1");
  EXPECT_EQ(plan_to_json(*measured)["routing"], "run 1");
  ASSERT_EQ(measured->shapes.size(), balanced->shapes.size());
  int checked = 0;
  for (const PlanEntry& e : measured->shapes) {
    const PlanEntry* b = nullptr;
    for (const PlanEntry& x : balanced->shapes)
      if (x.shape == e.shape) b = &x;
    ASSERT_NE(b, nullptr);
    if (e.shape.ep == 1) {
      EXPECT_EQ(e.time.step_s, b->time.step_s);
      EXPECT_EQ(e.memory.total(), b->memory.total());
      continue;
    }
    EXPECT_DOUBLE_EQ(e.step_imbalance, routing->step_imbalance(e.shape.ep));
    EXPECT_DOUBLE_EQ(e.memory_imbalance, routing->memory_imbalance(e.shape.ep));
    EXPECT_GT(e.time.step_s, b->time.step_s) << e.shape.compact();
    EXPECT_GT(e.memory.total(), b->memory.total()) << e.shape.compact();
    PlanQuery by_hand = q;
    by_hand.estimate.routing = nullptr;
    by_hand.fixed = e.shape;
    by_hand.estimate.memory.moe_imbalance = e.step_imbalance;
    auto timed = make_plan(by_hand);
    ASSERT_TRUE(timed.ok());
    EXPECT_DOUBLE_EQ(timed->shapes.front().time.step_s, e.time.step_s);
    by_hand.estimate.memory.moe_imbalance = e.memory_imbalance;
    auto sized = make_plan(by_hand);
    ASSERT_TRUE(sized.ok());
    EXPECT_EQ(sized->shapes.front().memory.total(), e.memory.total());
    ++checked;
  }
  EXPECT_GE(checked, 3);  // ep 2, 4 and 8 over dp_shard 8
  const nlohmann::json measured_json = plan_to_json(*measured);  // kept: the loop walks into it
  for (const nlohmann::json& s : measured_json["shapes"]) {
    if (!s.contains("ep")) continue;
    EXPECT_DOUBLE_EQ(s["routing_imbalance"]["step"].get<double>(), routing->step_imbalance(s["ep"].get<int>()));
  }

  // A measurement of another model is refused by the planner, in words.
  auto other = MeasuredRouting::make(example(), "run 9");
  q.estimate.routing = std::make_shared<const MeasuredRouting>(*other);
  auto refused = make_plan(q);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("run 9"), std::string::npos);
}
