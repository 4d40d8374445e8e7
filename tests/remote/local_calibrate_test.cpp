// `meshwork calibrate --local`: a real 2-rank `meshtrain calibrate` through the normal launch
// path (deploy, supervisor, streaming into the store). Its records are fitted and stored by
// fingerprint, the estimator accepts the calibration (every term it needs is calibrated), and
// `meshwork plan --calibration ID` plans with it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "core/calibration.h"
#include "core/store/calibration_store.h"
#include "core/store/run_store.h"
#include "core/time_estimate.h"
#include "core/shell_quote.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

namespace fs = std::filesystem;

std::string meshtrain() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

int meshwork(std::vector<std::string> args, const fs::path& tmp) {
  args.insert(args.begin(), std::string(MESHWORK_BIN_DIR) + "/meshwork");
  const std::string cmd = shell_join(args) + " > " + shell_quote((tmp / "out").string()) + " 2> " +
                          shell_quote((tmp / "err").string());
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(LocalCalibrate, TwoRanksGiveACalibrationTheEstimatorAccepts) {
  ASSERT_TRUE(fs::exists(meshtrain())) << meshtrain() << " is not built";
  const fs::path tmp = test::temp_dir("local-calibrate");
  const fs::path db = tmp / "runs.db";
  const fs::path out = tmp / "calibration.json";
  // Every split step measured again twice (a negative steal limit), as under CPU steal: the
  // repeats are collective and must not leave the ranks apart.
  ::setenv("MESHTRAIN_CALIBRATE_STEAL_LIMIT", "-1", 1);
  ASSERT_EQ(meshwork({"calibrate", "--local", "--nproc-per-node", "2", "--model", "tiny", "--seq-len", "64",
                      "--remote-root", (tmp / "runs").string(), "--meshtrain", meshtrain(), "--master-port",
                      std::to_string(32000 + ::getpid() % 900), "--db", db.string(), "--out", out.string()},
                     tmp),
            0)
      << test::read_text(tmp / "err") << test::read_text(tmp / "out");
  ::unsetenv("MESHTRAIN_CALIBRATE_STEAL_LIMIT");

  auto file = read_calibration_file(out.string());
  ASSERT_TRUE(file.ok()) << file.error().message();
  const Calibration& cal = *file;
  ASSERT_EQ(cal.fingerprint.nodes.size(), 1u);
  EXPECT_EQ(cal.fingerprint.nodes[0].devices, 2);
  EXPECT_EQ(cal.fingerprint.device, DeviceKind::cpu);
  EXPECT_NE(test::read_text(tmp / "out").find(cal.fingerprint.id()), std::string::npos);
  // Every collective the trainer uses, fitted at group size 2 inside the node.
  for (Collective op : kCollectives) {
    auto fit = cal.collective(LinkKind::intra_node, op, 2);
    ASSERT_TRUE(fit) << to_string(op);
    EXPECT_GT(fit->bytes_per_s, 0) << to_string(op);
    EXPECT_GE(fit->latency_s, 0) << to_string(op);
  }
  // Every rank timed a forward + backward of the model: the step efficiency is measured.
  EXPECT_GT(cal.step_efficiency, 0.05);
  EXPECT_LE(cal.step_efficiency, 1.0);
  EXPECT_TRUE(cal.matmul_flops(Precision::fp32, 2, 1));
  EXPECT_TRUE(cal.matmul_flops(Precision::bf16, 2, 2));
  // Every split of the node's 2 ranks trained a few steps of the model (tiny: its 2 layers) at 1
  // and 2 micro-batches: a factor
  // for each term those steps ran (compute at each split; tp, the cp ring, FSDP and the
  // replicas' all-reduce over 2 ranks inside the node).
  auto has = [&](FitTerm term, int a, int b) {
    return std::any_of(cal.step_factors.begin(), cal.step_factors.end(), [&](const FitFactor& f) {
      return f.key.term == term && f.key.a == a && f.key.b == b && f.key.link == LinkKind::intra_node &&
             f.factor > 0 && std::isfinite(f.factor);
    });
  };
  EXPECT_TRUE(has(FitTerm::compute, 1, 1));
  EXPECT_TRUE(has(FitTerm::compute, 2, 1));
  EXPECT_TRUE(has(FitTerm::compute, 1, 2));
  EXPECT_TRUE(has(FitTerm::tp, 2, 1));
  EXPECT_TRUE(has(FitTerm::cp_ring, 2, 1));
  EXPECT_TRUE(has(FitTerm::fsdp, 2, 1));
  EXPECT_TRUE(has(FitTerm::dp_replicate, 2, 1));
  EXPECT_EQ(cal.step_factors.size(), 7u) << to_json(cal).dump();

  // Every split step says how much of the CPUs was stolen while it ran and how often it was
  // measured (here three times, by the limit above); the ranks decide alike, so each rank has the
  // same splits with the same attempts.
  // Every split step also says how far apart its steps were (spread), and was timed in two
  // passes, the second in the opposite order: the first two splits' passes are the first and
  // last measurements (the drift check), and their records carry both (first_step_s,
  // again_step_s). The calibration's step_noise is what core makes of them: the largest
  // |again / first - 1| of a split (its ranks' mean) and the median of the splits' spreads
  // (their ranks' mean).
  std::vector<std::vector<std::string>> attempts_by_rank;
  std::map<std::string, std::vector<double>> drift_by_split, spread_by_split;
  for (const auto& entry : fs::recursive_directory_iterator(tmp / "runs")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("metrics-rank", 0) != 0) continue;
    std::vector<std::string> attempts;
    int drift_checked = 0;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || j.value("kind", "") != "split_step") continue;
      ASSERT_TRUE(j.contains("steal") && j.contains("attempts")) << line;
      EXPECT_GE(j["steal"].get<double>(), 0.0) << line;
      EXPECT_LE(j["steal"].get<double>(), 1.0) << line;
      EXPECT_EQ(j["attempts"].get<int>(), 3) << line;  // the first and two repeats
      attempts.push_back(j["config"]["mesh"].dump() + " x" + j["config"]["training"]["global_batch"].dump() +
                         ": " + j["attempts"].dump());
      const std::string split = j["config"].dump();
      ASSERT_TRUE(j.contains("spread") && j["spread"].is_number()) << line;
      EXPECT_GE(j["spread"].get<double>(), 0.0) << line;
      spread_by_split[split].push_back(j["spread"].get<double>());
      ASSERT_TRUE(j.contains("passes") && j["passes"].is_array() && j["passes"].size() == 2) << line;
      for (const auto& pass : j["passes"]) EXPECT_EQ(pass["attempts"].get<int>(), 3) << line;
      if (j.contains("again_step_s")) {
        ++drift_checked;
        EXPECT_GT(j["again_step_s"].get<double>(), 0.0) << line;
        EXPECT_EQ(j["first_step_s"], j["passes"][0]["step_s"]) << line;
        EXPECT_EQ(j["again_step_s"], j["passes"][1]["step_s"]) << line;
        drift_by_split[split].push_back(j["again_step_s"].get<double>() / j["first_step_s"].get<double>() - 1);
      }
    }
    EXPECT_EQ(drift_checked, 2) << entry.path();
    attempts_by_rank.push_back(attempts);
  }
  ASSERT_EQ(attempts_by_rank.size(), 2u);
  EXPECT_FALSE(attempts_by_rank[0].empty());
  EXPECT_EQ(attempts_by_rank[0], attempts_by_rank[1]);
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  double drift = 0;
  for (const auto& [split, d] : drift_by_split) drift = std::max(drift, std::abs(mean(d)));
  std::vector<double> spreads;
  for (const auto& [split, v] : spread_by_split)
    if (mean(v) > 0) spreads.push_back(mean(v));
  ASSERT_FALSE(spreads.empty());
  std::sort(spreads.begin(), spreads.end());
  const size_t n = spreads.size();
  const double spread = n % 2 ? spreads[n / 2] : 0.5 * (spreads[n / 2 - 1] + spreads[n / 2]);
  EXPECT_EQ(drift_by_split.size(), 2u);
  EXPECT_NEAR(cal.step_drift, drift, 1e-9);
  EXPECT_NEAR(cal.step_spread, spread, 1e-9);
  EXPECT_NEAR(cal.step_band(), std::max(drift, spread), 1e-9);

  // Stored by fingerprint, with the run that measured it; the run itself ended ok.
  auto store = store::RunStore::open(db);
  ASSERT_TRUE(store.ok());
  auto stored = store::latest_calibration(**store, cal.fingerprint.id());
  ASSERT_TRUE(stored.ok()) << stored.error().message();
  ASSERT_TRUE(stored->has_value());
  ASSERT_TRUE((*stored)->run.has_value());
  EXPECT_EQ((*store)->get_run(*(*stored)->run)->summary.status, "ok");
  EXPECT_EQ(to_json((*stored)->calibration), to_json(cal));

  // The estimator takes it: compute and every axis of these shapes from the calibration.
  ModelSpec tiny = *load_model_spec("tiny");
  for (MeshShape shape : {MeshShape{2, 1, 1, 1}, MeshShape{1, 2, 1, 1}, MeshShape{1, 1, 2, 1}, MeshShape{1, 1, 1, 2}}) {
    TimeQuery q;
    q.model = tiny;
    q.shape = shape;
    q.gpus_per_node = 2;
    q.training.seq_len = 64;
    q.training.precision = Precision::fp32;
    q.hardware = HardwareModel::cpu();
    q.calibration = cal;
    TimeEstimate t = estimate_time(q);
    EXPECT_TRUE(t.compute_calibrated) << shape.to_string();
    EXPECT_EQ(t.step_band, cal.step_band()) << shape.to_string();  // the calibration's own noise
    EXPECT_GT(t.step_s, 0) << shape.to_string();
    EXPECT_TRUE(std::isfinite(t.step_s)) << shape.to_string();
    EXPECT_GT(t.comm_s, 0) << shape.to_string();
    for (Axis a : kAxes)
      if (shape[a] > 1) {
        EXPECT_TRUE(t.comm_calibrated[a]) << shape.to_string();
      }
  }

  // meshwork plan finds it in the store by its id.
  ASSERT_EQ(meshwork({"plan", "--model", "tiny", "--nodes", "1", "--gpus-per-node", "2", "--gpu-memory", "1GiB",
                      "--seq-len", "64", "--micro-batch", "1", "--device", "cpu", "--precision", "fp32",
                      "--calibration", cal.fingerprint.id().substr(0, 8), "--db", db.string()},
                     tmp),
            0)
      << test::read_text(tmp / "err");
  EXPECT_NE(test::read_text(tmp / "out").find("Calibrated"), std::string::npos) << test::read_text(tmp / "out");
  // Beside each predicted step, how far to trust it: the band the calibration measured.
  char band[32];
  std::snprintf(band, sizeof band, "±%.1f%%", 100 * cal.step_band());
  EXPECT_GT(cal.step_band(), 0);  // timed steps are never all equal to the nanosecond
  EXPECT_NE(test::read_text(tmp / "out").find(band), std::string::npos) << band << "\n" << test::read_text(tmp / "out");
}

}  // namespace
}  // namespace meshwork::remote
