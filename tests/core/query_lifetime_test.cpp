// A query (time, memory, shape) kept longer than the thing its model came from: the queries hold
// their model by value, so nothing points into freed memory. Under ASan (scripts/test runs the
// core tests sanitized by default) a query that pointed at a freed ModelSpec fails here with a
// heap-use-after-free; without a sanitizer the garbage the estimate read would show as a changed
// number.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <type_traits>

#include "core/calibration_records.h"
#include "core/parallel_layout.h"
#include "core/planner.h"
#include "core/run_fit.h"

using namespace meshwork;

// The lifetime is part of the type: none of the queries can hold a pointer to its model.
static_assert(std::is_same_v<decltype(TimeQuery::model), ModelSpec>);
static_assert(std::is_same_v<decltype(MemoryQuery::model), ModelSpec>);
static_assert(std::is_same_v<decltype(ShapeQuery::model), std::optional<ModelSpec>>);
// Nor to the run's training settings: each holds its own TrainingConfig.
static_assert(std::is_same_v<decltype(TimeQuery::training), TrainingConfig>);
static_assert(std::is_same_v<decltype(MemoryQuery::training), TrainingConfig>);
static_assert(std::is_same_v<decltype(ShapeQuery::training), TrainingConfig>);
static_assert(std::is_same_v<decltype(PlanQuery::training), TrainingConfig>);

namespace {

RunConfig config_of(MeshShape shape) {
  RunConfig c;
  c.model = "tiny";
  c.mesh = shape;
  c.training.seq_len = 256;
  c.training.micro_batch = 1;
  c.training.global_batch = 4;
  c.training.precision = Precision::fp32;
  c.training.device = DeviceKind::cpu;
  return c;
}

// Overwrites freed heap blocks of about ModelSpec's size, so that a dangling read would see
// other numbers even without a sanitizer.
void churn_heap() {
  std::vector<std::unique_ptr<ModelSpec>> junk;
  for (int i = 0; i < 64; ++i) {
    auto m = std::make_unique<ModelSpec>();
    m->hidden_size = m->num_hidden_layers = m->vocab_size = 7'777'777 + i;
    junk.push_back(std::move(m));
  }
}

}  // namespace

TEST(QueryLifetime, TimeAndMemoryQueriesOutliveTheirModel) {
  const RunConfig config = config_of(MeshShape{1, 1, 2, 2});
  std::optional<TimeQuery> time_query;
  std::optional<MemoryQuery> memory_query;
  TimeEstimate time_before;
  MemoryBreakdown memory_before;
  {
    auto spec = std::make_unique<ModelSpec>(*load_model_spec("tiny"));
    LayoutCheck checked = ParallelLayout::check(config, spec.get(), Placement::of(config));
    ASSERT_TRUE(checked.ok());
    time_query = checked.layout->time_query(*spec, HardwareModel::cpu());
    memory_query = checked.layout->memory_query(*spec);
    time_before = estimate_time(*time_query);
    memory_before = estimate_memory(*memory_query);
  }  // the model the queries were made from is gone
  churn_heap();
  EXPECT_GT(time_before.step_s, 0);
  EXPECT_DOUBLE_EQ(estimate_time(*time_query).step_s, time_before.step_s);
  EXPECT_EQ(estimate_memory(*memory_query).total(), memory_before.total());
}

TEST(QueryLifetime, AQueryCopiedOutOfARunObservationOutlivesIt) {
  // The case the sanitizers caught: split_step_observations() makes observations, the caller
  // copies one's query and lets the observations go.
  RunConfig c = config_of(MeshShape{1, 1, 1, 2});
  std::vector<CalibrationRecord> records = {
      {0, 170, "split_step",
       {{"config", to_json(c)}, {"world", 2}, {"ranks_per_node", 2}, {"step_s", 1.0},
        {"compute_s", 1.0}, {"comm_s", {{"tp", 1.0}}}, {"iterations", 3}}}};
  std::optional<TimeQuery> kept;
  double before = 0;
  {
    const auto observations = split_step_observations(samples_from_records(records).split_steps);
    ASSERT_EQ(observations.size(), 1u);
    kept = *observations.front().query;
    before = estimate_time(*kept).step_s;
  }
  churn_heap();
  EXPECT_GT(before, 0);
  EXPECT_EQ(kept->model.name, "tiny");
  EXPECT_DOUBLE_EQ(estimate_time(*kept).step_s, before);
}

TEST(QueryLifetime, AShapeQueryOutlivesItsModel) {
  ShapeQuery q;
  q.shape = MeshShape{1, 1, 1, 3};  // tiny's heads are not a multiple of 3
  q.placement.world_size = 3;
  q.training.seq_len = 258;
  {
    auto spec = std::make_unique<ModelSpec>(*load_model_spec("tiny"));
    q.model = *spec;
  }
  churn_heap();
  const ShapeReport report = validate_shape(q);
  EXPECT_FALSE(report.ok());
  bool heads = false;
  for (const Diagnostic& d : report.errors()) heads = heads || d.field == "tp";
  EXPECT_TRUE(heads) << "the model rules ran on the kept model";
}
