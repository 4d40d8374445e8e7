// Training and calibration run one step: Trainer::train_step and the calibrator's split steps
// both call run_step() (trainer/step.h). Each test runs a real 2-rank task (run_rank or
// calibrate_rank, the ranks threads of this process with real Gloo over loopback, as
// run_ranks.h) with a step observer installed, and checks what the task wrote against what
// went through the runner: every step record of a training run is a runner step, and every
// split step calibration reports is the middle-half mean of runner steps, nothing else. A path
// that ran a step of its own would show no runner steps, or numbers no runner step produced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/calibration_records.h"
#include "core/metrics.h"
#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "tests/scratch_dirs.h"
#include "trainer/calibrate.h"
#include "trainer/free_port.h"
#include "trainer/options.h"
#include "trainer/step.h"
#include "trainer/train.h"

namespace meshwork::trainer {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("step-runner-test-" + std::to_string(getpid()));
  return ::meshwork::test::fresh_scratch_dir(root, root / name);
}

TrainerOptions options(const fs::path& dir, std::vector<std::string> args) {
  args.insert(args.end(), {"--model", "tiny", "--seq-len", "32", "--data",
                           std::string(MESHWORK_RESOURCE_DIR) + "/data/kjv.bin", "--run-dir", dir.string(),
                           "--metrics", (dir / "metrics.jsonl").string()});
  auto parsed = parse_options(args);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message();
  return parsed.ok() ? *parsed : TrainerOptions{};
}

// What went through run_step(), per world rank, in order.
class Observed {
 public:
  Observed() {
    set_step_observer([this](int rank, const StepResult& s) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (rank >= 0 && rank < static_cast<int>(steps_.size())) steps_[static_cast<size_t>(rank)].push_back(s);
    });
  }
  ~Observed() { set_step_observer({}); }
  const std::vector<StepResult>& of(int rank) const { return steps_[static_cast<size_t>(rank)]; }

 private:
  std::mutex mutex_;
  std::vector<std::vector<StepResult>> steps_{2};
};

// Runs task(env) for ranks 0 and 1 of one node, each a thread; returns their exit codes.
template <class Task>
std::vector<int> run_two_ranks(Task task) {
  const int port = free_tcp_port();
  std::vector<int> codes(2, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      LaunchEnv env;
      env.rank = env.local_rank = r;
      env.world_size = env.local_world_size = 2;
      env.master_port = port;
      codes[static_cast<size_t>(r)] = task(env);
    });
  for (std::thread& t : threads) t.join();
  return codes;
}

std::vector<MetricsRecord> records_of(const fs::path& dir, int rank) {
  std::ifstream in(dir / ("metrics-rank" + std::to_string(rank) + ".jsonl"));
  std::vector<MetricsRecord> out;
  for (std::string line; std::getline(in, line);) {
    auto r = parse_metrics_line(line);
    EXPECT_TRUE(r.ok()) << line;
    if (r.ok()) out.push_back(*r);
  }
  return out;
}

// As the calibrator summarises a split's timed steps: the mean of the middle half by time.
double middle_half_mean(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const size_t lo = times.size() / 4, hi = times.size() - times.size() / 4;
  double mean = 0;
  for (size_t k = lo; k < hi; ++k) mean += times[k] / static_cast<double>(hi - lo);
  return mean;
}

std::vector<double> step_times(const std::vector<StepResult>& steps, size_t from, size_t count) {
  std::vector<double> out;
  for (size_t k = from; k < from + count && k < steps.size(); ++k) out.push_back(steps[k].step_s);
  return out;
}

TEST(StepRunner, EveryTrainingStepRecordIsARunnerStep) {
  ::setenv("MESHWORK_SUPERVISED", "1", 1);  // no echo of the rank log
  const fs::path dir = temp_dir("train");
  // FSDP over both ranks, 2 micro-batches a step: the accumulation and the armed sync run.
  const TrainerOptions o = options(dir, {"--dp-shard", "2", "--steps", "3", "--global-batch", "4", "--micro-batch",
                                         "1", "--peak-tflops", "1"});
  auto spec = model_spec_from_run_model(o.run.model);
  ASSERT_TRUE(spec.ok());
  Placement placement;
  placement.world_size = 2;
  placement.ranks_per_node = 2;
  const LayoutCheck checked = ParallelLayout::check(o.run, &*spec, placement);
  ASSERT_TRUE(checked.ok());
  ASSERT_EQ(checked.layout->grad_accum_steps(), 2);

  Observed observed;
  const auto codes = run_two_ranks([&](const LaunchEnv& env) { return run_rank(o, env, *spec, *checked.layout); });
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));

  for (int rank = 0; rank < 2; ++rank) {
    std::vector<StepRecord> steps;
    for (const MetricsRecord& r : records_of(dir, rank))
      if (auto* s = std::get_if<StepRecord>(&r)) steps.push_back(*s);
    ASSERT_EQ(steps.size(), 3u) << "rank " << rank;
    const std::vector<StepResult>& ran = observed.of(rank);
    ASSERT_EQ(ran.size(), 3u) << "rank " << rank << ": steps through run_step()";
    for (size_t k = 0; k < steps.size(); ++k) {
      EXPECT_DOUBLE_EQ(steps[k].step_s, ran[k].step_s) << "rank " << rank << " step " << k;
      EXPECT_DOUBLE_EQ(steps[k].loss, ran[k].loss) << "rank " << rank << " step " << k;
      EXPECT_DOUBLE_EQ(steps[k].grad_norm, ran[k].grad_norm) << "rank " << rank << " step " << k;
      EXPECT_GT(ran[k].loss, 0);
      // The process's CPU time over the step (both ranks are threads of this one process here).
      ASSERT_TRUE(steps[k].cpu_s.has_value()) << "rank " << rank << " step " << k;
      EXPECT_DOUBLE_EQ(*steps[k].cpu_s, ran[k].cpu_s) << "rank " << rank << " step " << k;
      EXPECT_GT(ran[k].cpu_s, 0) << "rank " << rank << " step " << k;
    }
  }
}

TEST(StepRunner, EveryCalibratedSplitStepIsMeasuredOnRunnerSteps) {
  ::setenv("MESHWORK_SUPERVISED", "1", 1);
  ::setenv("MESHTRAIN_CALIBRATE_STEAL_LIMIT", "1", 1);  // never measured again for steal
  const fs::path dir = temp_dir("calibrate");
  TrainerOptions o = options(dir, {"--global-batch", "4"});
  o.calibrate = true;
  o.run.mesh = MeshShape{1, 2, 1, 1};  // as main() sets it for calibrate
  auto spec = model_spec_from_run_model(o.run.model);
  ASSERT_TRUE(spec.ok());

  Observed observed;
  const auto codes = run_two_ranks([&](const LaunchEnv& env) { return calibrate_rank(o, env, *spec); });
  ::unsetenv("MESHTRAIN_CALIBRATE_STEAL_LIMIT");
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));

  for (int rank = 0; rank < 2; ++rank) {
    std::vector<CalibrationRecord> splits;
    for (const MetricsRecord& r : records_of(dir, rank))
      if (auto* c = std::get_if<CalibrationRecord>(&r); c && c->kind == "split_step") splits.push_back(*c);
    // 2 ranks on a node: 2 x 1 x 1 x 1, cp 2, tp 2 and FSDP 2, each at 1 micro-batch and the
    // run's accumulation on it.
    size_t expected = 0;
    for (const MeshShape& shape : split_step_shapes(2, 2)) expected += split_step_micro_batches(o.run, shape).size();
    ASSERT_EQ(expected, 8u);
    ASSERT_EQ(splits.size(), expected) << "rank " << rank;
    const std::vector<StepResult>& ran = observed.of(rank);
    // Two passes over the splits, the second in the opposite order; each split's pass a warm-up
    // step, then its timed steps, all through the runner. Its record: the middle half of both
    // passes' steps together, and each pass's own.
    std::vector<std::vector<double>> pass_times[2];
    size_t at = 0;
    for (size_t pass = 0; pass < 2; ++pass) {
      pass_times[pass].resize(splits.size());
      for (size_t k = 0; k < splits.size(); ++k) {
        const size_t i = pass == 0 ? k : splits.size() - 1 - k;
        const nlohmann::json& p = splits[i].fields.at("passes").at(pass);
        const size_t timed = p.at("iterations").get<size_t>();
        ASSERT_GE(timed, 2u);  // split_pass_step_count()
        ASSERT_LE(at + 1 + timed, ran.size()) << "rank " << rank << ": fewer runner steps than calibration timed";
        pass_times[pass][i] = step_times(ran, at + 1, timed);
        const double reported = p.at("step_s").get<double>();
        EXPECT_NEAR(reported, middle_half_mean(pass_times[pass][i]), 1e-12 * reported)
            << "rank " << rank << ": pass " << pass << " of split " << i;
        at += 1 + timed;
      }
    }
    EXPECT_EQ(at, ran.size()) << "rank " << rank << ": runner steps the calibration did not report";
    for (size_t i = 0; i < splits.size(); ++i) {
      const CalibrationRecord& s = splits[i];
      std::vector<double> both = pass_times[0][i];
      both.insert(both.end(), pass_times[1][i].begin(), pass_times[1][i].end());
      const double reported = s.fields.at("step_s").get<double>();
      EXPECT_EQ(s.fields.at("iterations").get<size_t>(), both.size());
      EXPECT_GE(both.size(), 4u);
      EXPECT_NEAR(reported, middle_half_mean(both), 1e-12 * reported)
          << "rank " << rank << ": split " << s.fields.at("config").at("mesh").dump() << " at global batch "
          << s.fields.at("config").at("training").at("global_batch").dump();
      // The drift check: the first two splits' passes are the first and last measurements.
      if (i < 2) {
        EXPECT_DOUBLE_EQ(s.fields.at("first_step_s").get<double>(), s.fields.at("passes").at(0).at("step_s").get<double>());
        EXPECT_DOUBLE_EQ(s.fields.at("again_step_s").get<double>(), s.fields.at("passes").at(1).at("step_s").get<double>());
      } else {
        EXPECT_FALSE(s.fields.contains("again_step_s")) << "split " << i;
      }
    }
  }
}

}  // namespace
}  // namespace meshwork::trainer
