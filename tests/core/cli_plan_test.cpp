// Integration: runs the built `meshwork plan` (bin/meshwork next to this test binary;
// its own executable, label integration, built after the meshwork target) and checks
// exit codes, stderr words and the --json document.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

struct CliRun {
  int rc = -1;
  std::string out;
  std::string err;
};

fs::path meshwork_binary() {
  return fs::read_symlink("/proc/self/exe").parent_path() / "meshwork";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun plan(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string cmd = meshwork_binary().string() + " plan " + args + " >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string();
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

const std::string kCluster =
    "--model llama-3.1-8b --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB --seq-len 8192 "
    "--micro-batch 1";

class CliPlanIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    // CMake makes this test depend on the meshwork target, so a missing binary is a failure.
    ASSERT_TRUE(fs::exists(meshwork_binary())) << meshwork_binary() << " is not built";
  }
};

}  // namespace

TEST_F(CliPlanIntegration, JsonRankedShapesExitZero) {
  CliRun r = plan(kCluster + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 16);
  EXPECT_EQ(j["model"]["name"], "llama-3.1-8b");
  EXPECT_EQ(j["model"]["params"], 8'030'261'248);
  ASSERT_EQ(j["shapes"].size(), 35u);  // every factorization of 16: meshtrain runs them all
  EXPECT_TRUE(j["shapes"][0]["fits"].get<bool>());
  EXPECT_GT(j["shapes"][0]["tokens_per_s"].get<double>(), 0);
  EXPECT_LE(j["shapes"][0]["memory_bytes"]["total"].get<int64_t>(), 80LL << 30);
  EXPECT_TRUE(j["shapes"][0]["comm_s"].contains("dp_shard"));
}

TEST_F(CliPlanIntegration, HumanTable) {
  CliRun r = plan(kCluster + " --precision bf16 --activation-checkpointing full");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Memory per rank in GiB"), std::string::npos);
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos);
  EXPECT_NE(r.out.find("35 valid shape(s); Accelerate would refuse #"), std::string::npos) << r.out;
}

TEST_F(CliPlanIntegration, SizesInEveryUnitAgree) {
  for (const char* size : {"80GiB", "81920MiB", "85899345920B"}) {
    CliRun r = plan("--model tiny --nodes 1 --gpus-per-node 4 --gpu-memory " + std::string(size) +
                 " --seq-len 256 --micro-batch 1 --json");
    ASSERT_EQ(r.rc, 0) << size << r.err;
  }
  EXPECT_EQ(plan("--model tiny --nodes 1 --gpus-per-node 4 --gpu-memory 80GB --seq-len 256 "
                 "--micro-batch 1 --json")
                .rc,
            0);
}

TEST_F(CliPlanIntegration, FullyGivenShape) {
  CliRun r = plan(kCluster + " --dp-replicate 2 --dp-shard 4 --cp 1 --tp 2 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["shapes"].size(), 1u);
  EXPECT_EQ(j["shapes"][0]["tp"], 2);
}

TEST_F(CliPlanIntegration, NothingFitsExitsThree) {
  CliRun r = plan("--model llama-3.1-405b --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB "
               "--seq-len 8192 --micro-batch 1 --json");
  EXPECT_EQ(r.rc, 3) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["shapes"][0]["fits"].get<bool>());
}

TEST_F(CliPlanIntegration, InvalidInputExitsTwoWithFieldValueAllowed) {
  CliRun size = plan("--model tiny --nodes 1 --gpus-per-node 8 --gpu-memory 80 --seq-len 8 "
                  "--micro-batch 1");
  EXPECT_EQ(size.rc, 2);
  EXPECT_EQ(size.err.rfind("meshwork: --gpu-memory: 80: ", 0), 0u) << size.err;
  EXPECT_TRUE(size.out.empty());

  CliRun shape = plan(kCluster + " --global-batch 8 --dp-replicate 16 --dp-shard 1 --cp 1 --tp 1");
  EXPECT_EQ(shape.rc, 2);
  EXPECT_EQ(shape.err.rfind("meshwork: global_batch: 8: ", 0), 0u) << shape.err;

  CliRun model = plan("--model no-such-model --nodes 1 --gpus-per-node 8 --gpu-memory 80GiB "
                   "--seq-len 8 --micro-batch 1");
  EXPECT_EQ(model.rc, 2);
  EXPECT_EQ(model.err.rfind("meshwork: --model: no-such-model: ", 0), 0u) << model.err;

  EXPECT_EQ(plan("--model tiny").rc, 2);
  EXPECT_EQ(plan(kCluster + " --precision fp16").rc, 2);
  EXPECT_EQ(plan(kCluster + " --tp 3").rc, 2);
  EXPECT_EQ(plan(kCluster + " --frobnicate").rc, 2);
}

TEST_F(CliPlanIntegration, HuggingFaceModelDirectory) {
  // A model directory as save_pretrained leaves it (config.json beside the weights): the same
  // plan as the preset whose config.json it holds.
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_hf_" + std::to_string(getpid())) / "Llama-8B";
  fs::create_directories(dir);
  fs::copy_file(fs::path(MESHWORK_RESOURCE_DIR) / "models" / "llama-3.1-8b.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {}})";
  CliRun r = plan("--model " + dir.string() +
                  " --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB --seq-len 8192 --micro-batch 1 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["name"], "Llama-8B");
  EXPECT_EQ(j["model"]["params"], 8'030'261'248);
  fs::remove_all(dir.parent_path());
}

namespace {

// Runs the built CLI with any subcommand (the fit test imports runs first).
int meshwork(const std::string& args) {
  const int status = std::system((meshwork_binary().string() + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

nlohmann::json shape_of(const nlohmann::json& plan, const std::string& compact) {
  for (const auto& s : plan["shapes"]) {
    const std::string c = std::to_string(s["dp_replicate"].get<int>()) + "x" + std::to_string(s["dp_shard"].get<int>()) +
                          "x" + std::to_string(s["cp"].get<int>()) + "x" + std::to_string(s["tp"].get<int>());
    if (c == compact) return s;
  }
  return nullptr;
}

}  // namespace

const std::string kFitCluster =
    "--model tiny --nodes 1 --gpus-per-node 4 --gpu-memory 8GiB --seq-len 256 --micro-batch 1 "
    "--global-batch 8 --precision fp32 --device cpu";

// A finished run of plan shape `s` (4 CPU ranks on one host) written in meshtrain's own line
// format into `dir` and imported into `db` with `meshwork runs import`: it measured `compute`
// times the plan's compute and `comm` times its communication (step 0, warm-up, 50x: the fit
// must leave it out).
void store_run(const nlohmann::json& s, const fs::path& dir, const fs::path& db, double compute, double comm) {
  const nlohmann::json mesh = {{"dp_replicate", s["dp_replicate"]}, {"dp_shard", s["dp_shard"]}, {"cp", s["cp"]}, {"tp", s["tp"]}};
  const nlohmann::json config = {{"model", "tiny"}, {"mesh", mesh},
                                 {"training", {{"steps", 4}, {"seq_len", 256}, {"global_batch", 8}, {"micro_batch", 1},
                                               {"precision", "fp32"}, {"device", "cpu"}}}};
  fs::create_directories(dir);
  for (int r = 0; r < 4; ++r) {
    std::ofstream f(dir / ("metrics-rank" + std::to_string(r) + ".jsonl"));
    f << nlohmann::json{{"v", 1}, {"type", "start"}, {"rank", r}, {"time", 1000}, {"host", "fit-host"}, {"pid", 10 + r},
                        {"node", 0}, {"world", 4}, {"mesh", mesh}, {"config", config}}.dump() << "\n";
    for (int step = 0; step < 4; ++step) {
      const double warm = step == 0 ? 50 : 1;
      nlohmann::json comm_s = s["comm_s"];
      double step_s = compute * warm * s["compute_s"].get<double>();
      for (auto& [axis, v] : comm_s.items()) {
        v = comm * warm * v.get<double>();
        step_s += v.get<double>();
      }
      f << nlohmann::json{{"v", 1}, {"type", "step"}, {"step", step}, {"rank", r}, {"time", 1001 + step}, {"loss", 5.0},
                          {"lr", 1e-3}, {"grad_norm", 1.0}, {"tokens", 512}, {"tokens_per_s", 100.0}, {"tflops", 0.1},
                          {"mfu", 0.1}, {"mem_bytes", 1000}, {"mem_peak_bytes", 2000}, {"comm_s", comm_s},
                          {"compute_s", compute * warm * s["compute_s"].get<double>()}, {"step_s", step_s}}.dump() << "\n";
    }
    f << nlohmann::json{{"v", 1}, {"type", "end"}, {"rank", r}, {"time", 1010}, {"status", "ok"}}.dump() << "\n";
  }
  ASSERT_EQ(meshwork("runs import " + dir.string() + " --db " + db.string()), 0) << dir;
}

TEST_F(CliPlanIntegration, FitRunsLearnsEachTermFromStoredRuns) {
  // 4 CPU ranks on one node. Runs that measured 3x the plan's compute and 2x its communication,
  // each shape three times (the fit of these 4 shapes has 8 unknowns and is judged on runs it did
  // not learn from: it needs more runs than unknowns), then planned again with --fit-runs.
  const std::string cluster = kFitCluster;
  CliRun base = plan(cluster + " --json");
  ASSERT_EQ(base.rc, 0) << base.err;
  const nlohmann::json plan0 = nlohmann::json::parse(base.out);
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_fit_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path db = dir / "runs.db";
  const std::vector<std::string> stored = {"4x1x1x1", "1x4x1x1", "1x1x1x4", "2x1x1x2"};
  for (int copy = 0; copy < 3; ++copy)
    for (const std::string& compact : stored) {
      const nlohmann::json s = shape_of(plan0, compact);
      ASSERT_FALSE(s.is_null()) << compact;
      store_run(s, dir / (compact + "-" + std::to_string(copy)), db, 3, 2);
    }

  CliRun fitted = plan(cluster + " --fit-runs auto --db " + db.string() + " --json");
  ASSERT_EQ(fitted.rc, 0) << fitted.err;
  const nlohmann::json plan1 = nlohmann::json::parse(fitted.out);
  // Every shape, stored or not: compute 3x, each communicating axis 2x (unseen group sizes and
  // splits take the median of their term's factors, which are all 3 or 2 here).
  for (const auto& s1 : plan1["shapes"]) {
    const std::string compact = std::to_string(s1["dp_replicate"].get<int>()) + "x" + std::to_string(s1["dp_shard"].get<int>()) +
                                "x" + std::to_string(s1["cp"].get<int>()) + "x" + std::to_string(s1["tp"].get<int>());
    const nlohmann::json s0 = shape_of(plan0, compact);
    EXPECT_NEAR(s1["compute_s"].get<double>(), 3 * s0["compute_s"].get<double>(), 1e-6 * s0["compute_s"].get<double>())
        << compact;
    EXPECT_TRUE(s1["fitted"]["compute"].get<bool>()) << compact;
    for (const char* axis : {"dp_replicate", "dp_shard", "tp"})
      EXPECT_NEAR(s1["comm_s"][axis].get<double>(), 2 * s0["comm_s"][axis].get<double>(),
                  1e-6 * std::max(1e-9, s0["comm_s"][axis].get<double>())) << compact << " " << axis;
  }
  // The fit goes with the plan, judged out of sample: each of the 12 runs predicted by the others.
  ASSERT_TRUE(plan1.contains("fit")) << fitted.out;
  EXPECT_EQ(plan1["fit"]["runs"], 12);
  EXPECT_EQ(plan1["fit"]["out_of_sample"]["unknowns"], 8);
  EXPECT_EQ(plan1["fit"]["out_of_sample"]["judged_runs"], 12);
  CliRun table = plan(cluster + " --fit-runs auto --db " + db.string());
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_NE(table.out.find("Fitted to 12 stored run(s) of cluster "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("its step error out of sample: median "), std::string::npos) << table.out;

  CliRun empty = plan(cluster + " --fit-runs auto --db " + (dir / "none.db").string());
  EXPECT_EQ(empty.rc, 2);
  EXPECT_EQ(empty.err.rfind("meshwork: --fit-runs: auto: runs stored in ", 0), 0u) << empty.err;
  fs::remove_all(dir);
}

// One shape (compute and the dp_replicate all-reduce of 4: two unknowns) measured by 1, 2 and 3
// runs that differ by a few percent: with 1 or 2 the CLI refuses to fit (no run would be left to
// judge the fit on that it did not learn from) and says so; with 3 it fits, and the error it
// reports is each run's miss when predicted by the fit of the other two, larger than the misses
// on the runs it learnt from.
TEST_F(CliPlanIntegration, FitRunsIsJudgedOutOfSampleAndRefusedFromTooFewRuns) {
  CliRun base = plan(kFitCluster + " --json");
  ASSERT_EQ(base.rc, 0) << base.err;
  const nlohmann::json s = shape_of(nlohmann::json::parse(base.out), "4x1x1x1");
  ASSERT_FALSE(s.is_null());
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_oos_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path db = dir / "runs.db";
  const std::vector<std::pair<double, double>> measured = {{3.0, 2.0}, {3.3, 1.9}, {2.8, 2.3}};
  for (size_t n = 0; n < measured.size(); ++n) {
    store_run(s, dir / ("run-" + std::to_string(n)), db, measured[n].first, measured[n].second);
    const int runs = static_cast<int>(n) + 1;
    CliRun r = plan(kFitCluster + " --fit-runs auto --db " + db.string() + " --json");
    if (runs < 3) {
      EXPECT_EQ(r.rc, 2) << runs << " run(s): " << r.out;
      EXPECT_TRUE(r.out.empty()) << r.out;
      const std::string said = std::to_string(runs) + (runs == 1 ? " run" : " runs") +
                               ": a fit of 2 unknowns needs 3 runs or more: fewer leave it no run to be judged on "
                               "that it did not learn from; finish more runs on these nodes, or plan without "
                               "--fit-runs (the hardware defaults)";
      EXPECT_EQ(r.err.rfind("meshwork: --fit-runs: auto (cluster ", 0), 0u) << r.err;
      EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
      continue;
    }
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json fit = nlohmann::json::parse(r.out)["fit"];
    EXPECT_EQ(fit["runs"], 3);
    EXPECT_EQ(fit["out_of_sample"]["unknowns"], 2);
    EXPECT_EQ(fit["out_of_sample"]["judged_runs"], 3);
    const double median = fit["median_residual"].get<double>(), worst = fit["worst_residual"].get<double>();
    const double in_median = fit["out_of_sample"]["in_sample_median_residual"].get<double>();
    EXPECT_GT(median, 0.01) << fit.dump();
    EXPECT_GE(worst, median);
    EXPECT_GT(median, in_median) << fit.dump();
    // The plan's step carries the out-of-sample median as its ± (what no prediction beats).
    const nlohmann::json planned = shape_of(nlohmann::json::parse(r.out), "4x1x1x1");
    EXPECT_NEAR(planned["step_band"].get<double>(), median, 1e-9) << planned.dump();
    CliRun table = plan(kFitCluster + " --fit-runs auto --db " + db.string());
    ASSERT_EQ(table.rc, 0) << table.err;
    EXPECT_NE(table.out.find("Fitted to 3 stored run(s) of cluster "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("(2 unknowns)"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("(each of 3 runs predicted by the fit of the others)"), std::string::npos) << table.out;
  }
  fs::remove_all(dir);
}

// A calibration file (as `meshwork calibrate` writes it) with and without the calibration's own
// noise: with it, every calibrated step carries "±" the band and a line says where it came from;
// without it (a calibration from before the drift check), neither, and it is still "Calibrated".
TEST_F(CliPlanIntegration, CalibratedStepsCarryTheCalibrationsNoise) {
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_cal_" + std::to_string(getpid()));
  fs::create_directories(dir);
  nlohmann::json cal = {
      {"v", 1},
      {"fingerprint",
       {{"device", "cpu"},
        {"nodes", {{{"host", "box"}, {"devices", 4}, {"device_name", "cpu"}, {"cores", 4}}}},
        {"links", {"intra_node"}}}},
      {"measured_at", "2026-11-28T12:00:00Z"},
      {"step_efficiency", 0.5},
      {"matmul", {{{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 4}, {"split", 1}, {"flops_per_s", 2e10}}}},
      {"collectives", nlohmann::json::array()}};
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "send_recv"})
    for (int n : {2, 4})
      cal["collectives"].push_back({{"link", "intra_node"}, {"op", op}, {"group_size", n}, {"latency_s", 1e-4},
                                    {"bytes_per_s", 1e9}});
  const std::string args = "--model tiny --nodes 1 --gpus-per-node 4 --gpu-memory 1GiB --seq-len 256 "
                           "--micro-batch 1 --device cpu --precision fp32 --calibration " + (dir / "cal.json").string();
  std::ofstream(dir / "cal.json") << cal.dump();
  CliRun quiet = plan(args);
  ASSERT_EQ(quiet.rc, 0) << quiet.err;
  EXPECT_NE(quiet.out.find("Calibrated: compute and collectives"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.out.find("Hardware defaults"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.out.find(" ±"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.out.find("(interquartile range)"), std::string::npos) << quiet.out;

  cal["step_noise"] = {{"drift", 0.06}, {"spread", 0.125}};
  std::ofstream(dir / "cal.json") << cal.dump();
  CliRun noisy = plan(args);
  ASSERT_EQ(noisy.rc, 0) << noisy.err;
  EXPECT_NE(noisy.out.find(" ±12.5%"), std::string::npos) << noisy.out;
  EXPECT_NE(noisy.out.find("moved 6% from its first measurement to its last, and its steps varied 12% "
                           "(interquartile range): no prediction is closer than ±12%"),
            std::string::npos)
      << noisy.out;
  EXPECT_EQ(noisy.out.find("Hardware defaults"), std::string::npos) << noisy.out;
  CliRun json = plan(args + " --json");
  ASSERT_EQ(json.rc, 0) << json.err;
  for (const auto& shape : nlohmann::json::parse(json.out)["shapes"]) EXPECT_EQ(shape["step_band"], 0.125) << shape.dump();

  // Noise the calibration could not have measured is refused, naming the field.
  cal["step_noise"]["spread"] = -1;
  std::ofstream(dir / "cal.json") << cal.dump();
  CliRun bad = plan(args);
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("step_noise.spread"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

// --gpu KIND: the kind's memory, peaks and links from core/gpu_kinds.h. An H100 80 GB plans as
// --gpu-memory 80GiB does (the GPU defaults are an H100's); another kind changes the numbers.
TEST_F(CliPlanIntegration, GpuKindGivesItsMemoryPeaksAndLinks) {
  const std::string rest = "--model llama-3.1-8b --nodes 2 --gpus-per-node 8 --seq-len 8192 --micro-batch 1 --json";
  CliRun by_size = plan(rest + " --gpu-memory 80GiB");
  CliRun by_kind = plan(rest + " --gpu h100-80gb");
  ASSERT_EQ(by_size.rc, 0) << by_size.err;
  ASSERT_EQ(by_kind.rc, 0) << by_kind.err;
  EXPECT_EQ(by_kind.out, by_size.out);
  CliRun b200 = plan(rest + " --gpu b200");
  ASSERT_EQ(b200.rc, 0) << b200.err;
  const nlohmann::json h = nlohmann::json::parse(by_size.out), b = nlohmann::json::parse(b200.out);
  EXPECT_GT(b["shapes"][0]["tokens_per_s"].get<double>(), 1.5 * h["shapes"][0]["tokens_per_s"].get<double>());
  // --gpu-memory wins over the kind's memory.
  CliRun small = plan(rest + " --gpu b200 --gpu-memory 8GiB");
  EXPECT_EQ(small.rc, 3) << small.err;
  CliRun bad = plan(rest + " --gpu toaster");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--gpu: toaster: one of h100-80gb, h200, b200"), std::string::npos) << bad.err;
  CliRun cpu = plan(rest + " --gpu h200 --device cpu");
  EXPECT_EQ(cpu.rc, 2);
  EXPECT_NE(cpu.err.find("--gpu: h200: GPUs: not with --device cpu"), std::string::npos) << cpu.err;
}

// --routing RUN: a real meshtrain run of a small Qwen3-MoE (tests/store/data: 8 experts, sparse
// layers 0, 2 and 3, at dp_shard 2) imported into a store; the plan of that model takes each
// ep shape's imbalance from it, larger for finer splits, and its ep shapes cost more than the
// balanced plan's while the shapes without ep are unchanged. Runs of another model, unknown
// runs and dense runs are refused naming --routing.
TEST_F(CliPlanIntegration, RoutingFromAStoredRunGivesEachEpItsImbalance) {
  const fs::path dir = fs::temp_directory_path() / ("meshwork_cli_plan_routing_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "moe-run");
  const fs::path data = MESHWORK_STORE_TEST_DATA;
  fs::copy_file(data / "moe-run-rank0.jsonl", dir / "moe-run" / "metrics-rank0.jsonl");
  fs::copy_file(data / "moe-run-rank1.jsonl", dir / "moe-run" / "metrics-rank1.jsonl");
  const fs::path db = dir / "runs.db";
  ASSERT_EQ(meshwork("runs import " + (dir / "moe-run").string() + " --db " + db.string() + " --name moe-run"), 0);
  // The model of that run, as transformers' config.json names it.
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 48, "intermediate_size": 96, "moe_intermediate_size": 24, "num_hidden_layers": 4,
    "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 8, "vocab_size": 250,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
    "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": true, "decoder_sparse_step": 1,
    "mlp_only_layers": [1], "router_aux_loss_coef": 0.001})";
  const std::string cluster = "--model " + (dir / "config.json").string() +
                              " --nodes 1 --gpus-per-node 8 --device cpu --gpu-memory 8GiB --seq-len 32 "
                              "--micro-batch 2 --global-batch 16 --precision fp32";
  CliRun balanced = plan(cluster + " --json");
  ASSERT_EQ(balanced.rc, 0) << balanced.err;
  CliRun measured = plan(cluster + " --routing moe-run --db " + db.string() + " --json");
  ASSERT_EQ(measured.rc, 0) << measured.err;
  const nlohmann::json b = nlohmann::json::parse(balanced.out), m = nlohmann::json::parse(measured.out);
  EXPECT_EQ(m["routing"], "run 1 (moe-run)");
  EXPECT_FALSE(b.contains("routing"));
  auto key = [](const nlohmann::json& s) {
    return s["dp_replicate"].dump() + "x" + s["dp_shard"].dump() + "x" + s["cp"].dump() + "x" + s["tp"].dump() + ":" +
           (s.contains("ep") ? s["ep"].dump() : "1");
  };
  std::map<std::string, nlohmann::json> before;
  for (const auto& s : b["shapes"]) before[key(s)] = s;
  std::map<int, double> step_gamma, memory_gamma;
  for (const auto& s : m["shapes"]) {
    const nlohmann::json& s0 = before.at(key(s));
    if (!s.contains("ep")) {
      EXPECT_EQ(s["step_time_s"], s0["step_time_s"]) << key(s);
      EXPECT_EQ(s["memory_bytes"]["total"], s0["memory_bytes"]["total"]) << key(s);
      continue;
    }
    const int ep = s["ep"].get<int>();
    const double g_step = s["routing_imbalance"]["step"].get<double>(), g_mem = s["routing_imbalance"]["memory"].get<double>();
    EXPECT_EQ(s0["routing_imbalance"]["step"].get<double>(), 1.0);
    EXPECT_GT(g_mem, 1.0) << key(s);
    EXPECT_GT(g_step, 1.0) << key(s);
    EXPECT_GT(s["step_time_s"].get<double>(), s0["step_time_s"].get<double>()) << key(s);
    EXPECT_GT(s["memory_bytes"]["total"].get<int64_t>(), s0["memory_bytes"]["total"].get<int64_t>()) << key(s);
    // Same ep, same routing: one gamma whatever the rest of the shape.
    if (step_gamma.count(ep)) EXPECT_EQ(step_gamma[ep], g_step);
    step_gamma[ep] = g_step;
    memory_gamma[ep] = g_mem;
  }
  ASSERT_EQ(step_gamma.size(), 3u);  // ep 2, 4, 8
  // A finer split's busiest block is at least as far above its mean as a coarser one's.
  EXPECT_LE(step_gamma[2], step_gamma[4]);
  EXPECT_LE(step_gamma[4], step_gamma[8]);
  EXPECT_LE(memory_gamma[2], memory_gamma[4]);

  CliRun table = plan(cluster + " --routing 1 --db " + db.string());
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_NE(table.out.find("routing as run 1 (moe-run) measured it"), std::string::npos) << table.out;

  CliRun unknown = plan(cluster + " --routing 7 --db " + db.string());
  EXPECT_EQ(unknown.rc, 2) << unknown.err;
  EXPECT_EQ(unknown.err.rfind("meshwork: --routing: ", 0), 0u) << unknown.err;
  CliRun other = plan("--model qwen3-30b-a3b --nodes 1 --gpus-per-node 8 --gpu-memory 80GiB --seq-len 4096 "
                      "--micro-batch 1 --routing moe-run --db " + db.string());
  EXPECT_EQ(other.rc, 2);
  EXPECT_NE(other.err.find("--routing: run 1 (moe-run): 8 experts"), std::string::npos) << other.err;
  CliRun dense = plan(kCluster + " --routing moe-run --db " + db.string());
  EXPECT_EQ(dense.rc, 2);
  EXPECT_NE(dense.err.find("is dense"), std::string::npos) << dense.err;
  CliRun nodb = plan(cluster + " --routing moe-run --db " + (dir / "none.db").string());
  EXPECT_EQ(nodb.rc, 2);
  EXPECT_NE(nodb.err.find("does not exist"), std::string::npos) << nodb.err;
  fs::remove_all(dir);
}
