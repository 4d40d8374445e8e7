// meshtrain started from Hugging Face checkpoints written by the real transformers library
// (tests/trainer/hf_reference.py, run with MESHWORK_PYTHON): the loss of the first step, before
// any update, equals transformers' loss on the same tokens within 1e-5 relative (fp32), for one
// process and for multi-process Gloo meshes (dp_shard x tp, cp, dp_replicate x dp_shard), and a
// broken checkpoint is refused with a message naming the file and the tensor.
#include <gtest/gtest.h>

#include "tests/scratch_dirs.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/metrics.h"
#include "trainer/free_port.h"

namespace fs = std::filesystem;
using namespace meshwork;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("hf-load-test-" + std::to_string(getpid()));
  return ::meshwork::test::fresh_scratch_dir(root, root / name);  // removed when every test passed
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv with stdout/stderr to files in `dir`; returns the exit code.
int run(const std::vector<std::string>& argv, const fs::path& dir) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* out = freopen((dir / "stdout.txt").c_str(), "w", stdout);
    FILE* err = freopen((dir / "stderr.txt").c_str(), "w", stderr);
    (void)out;
    (void)err;
    std::vector<std::string> a = argv;
    std::vector<char*> args;
    for (auto& s : a) args.push_back(s.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

constexpr int kSeqLen = 32, kBatch = 4;

// A checkpoint written by transformers and its loss on the first global batch.
struct Reference {
  fs::path dir;  // model/ (the HF directory) and tokens.bin
  double loss = 0;
};

Reference make_reference(const std::string& name, const std::vector<std::string>& args) {
  Reference r;
  r.dir = temp_dir(name);
  std::vector<std::string> argv = {MESHWORK_PYTHON, HF_REFERENCE_PY, r.dir.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  for (auto a : {"--seq-len", "32", "--batch", "4"}) argv.push_back(a);
  const int rc = run(argv, r.dir);
  EXPECT_EQ(rc, 0) << slurp(r.dir / "stderr.txt");
  r.loss = std::stod("0" + slurp(r.dir / "stdout.txt"));
  return r;
}

std::vector<std::string> meshtrain_args(const Reference& ref, const fs::path& run_dir) {
  return {MESHTRAIN_BIN, "--model", (ref.dir / "model").string(), "--data", (ref.dir / "tokens.bin").string(),
          "--steps", "1", "--seq-len", std::to_string(kSeqLen), "--global-batch", std::to_string(kBatch),
          "--micro-batch", "1", "--peak-tflops", "1", "--run-dir", run_dir.string(),
          "--master-port", std::to_string(free_tcp_port())};
}

// The loss of meshtrain's step 0 (before any update) with `shape` on nproc processes.
double meshtrain_loss(const Reference& ref, const std::string& name, int nproc, const std::vector<std::string>& shape,
                      const std::vector<std::string>& extra = {}) {
  fs::path d = ref.dir / ("run-" + name);
  fs::create_directories(d);
  auto args = meshtrain_args(ref, d);
  if (nproc > 1) {
    args.push_back("--nproc-per-node");
    args.push_back(std::to_string(nproc));
  }
  args.insert(args.end(), shape.begin(), shape.end());
  args.insert(args.end(), extra.begin(), extra.end());
  const int rc = run(args, d);
  EXPECT_EQ(rc, 0) << name << ": " << slurp(d / "stderr.txt") << slurp(d / "rank0.log");
  std::ifstream in(d / "metrics-rank0.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto rec = parse_metrics_line(line);
    if (rec.ok() && std::holds_alternative<StepRecord>(*rec)) return std::get<StepRecord>(*rec).loss;
  }
  ADD_FAILURE() << name << ": no step record";
  return 0;
}

void expect_loss(const Reference& ref, const std::string& name, int nproc, const std::vector<std::string>& shape) {
  const double got = meshtrain_loss(ref, name, nproc, shape);
  EXPECT_LT(std::abs(got - ref.loss) / ref.loss, 1e-5) << name << ": meshtrain " << got << " vs transformers " << ref.loss;
}

const std::vector<std::string> kShardTp = {"--dp-shard", "2", "--tp", "2"};
const std::vector<std::string> kCp = {"--cp", "2"};
const std::vector<std::string> kHsdp = {"--dp-replicate", "2", "--dp-shard", "2"};

TEST(HfLoad, LlamaUntiedShardedEveryShape) {
  // 6 heads over 2 kv heads so tp 2 splits them; shards of 30 KB: several files.
  auto ref = make_reference("llama", {"llama", "--kv-heads", "2", "--shard-kb", "30"});
  ASSERT_TRUE(fs::exists(ref.dir / "model" / "model.safetensors.index.json"));
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "shard2tp2", 4, kShardTp);
  expect_loss(ref, "cp2", 2, kCp);
  expect_loss(ref, "rep2shard2", 4, kHsdp);
  // --init random ignores the weights (a different loss); the default read them.
  const double random = meshtrain_loss(ref, "random", 1, {}, {"--init", "random"});
  EXPECT_GT(std::abs(random - ref.loss) / ref.loss, 1e-3);
}

TEST(HfLoad, LlamaTiedUnsharded) {
  auto ref = make_reference("tied", {"llama", "--kv-heads", "2", "--tied"});
  ASSERT_TRUE(fs::exists(ref.dir / "model" / "model.safetensors"));
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "shard2tp2", 4, kShardTp);
}

TEST(HfLoad, Llama3RopeScaling) {
  auto ref = make_reference("llama3", {"llama3"});
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "cp2", 2, kCp);
}

TEST(HfLoad, Qwen2WithBiasEveryShape) {
  auto ref = make_reference("qwen2", {"qwen2", "--kv-heads", "2", "--shard-kb", "40"});
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "shard2tp2", 4, kShardTp);
  expect_loss(ref, "cp2", 2, kCp);
  expect_loss(ref, "rep2shard2", 4, kHsdp);
}

TEST(HfLoad, MistralEveryShape) {
  auto ref = make_reference("mistral", {"mistral", "--kv-heads", "2"});
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "shard2tp2", 4, kShardTp);
  expect_loss(ref, "cp2", 2, kCp);
  expect_loss(ref, "rep2shard2", 4, kHsdp);
}

TEST(HfLoad, OddSizesShardedOverRanks) {
  // 6 heads over 3 kv heads, vocab 250: FSDP shards cut units at odd places (padding).
  auto ref = make_reference("odd", {"qwen2", "--kv-heads", "3", "--tied"});
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "rep2shard2", 4, kHsdp);
  expect_loss(ref, "cp2", 2, kCp);
}

TEST(HfLoad, Qwen3PerHeadQkNormsEveryShape) {
  auto ref = make_reference("qwen3", {"qwen3", "--kv-heads", "2"});
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "shard2tp2", 4, kShardTp);
}

// Every step record of rank 0 in run directory d.
std::vector<StepRecord> steps_of(const fs::path& d) {
  std::vector<StepRecord> out;
  std::ifstream in(d / "metrics-rank0.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto rec = parse_metrics_line(line);
    if (rec.ok() && std::holds_alternative<StepRecord>(*rec)) out.push_back(std::get<StepRecord>(*rec));
  }
  return out;
}

// `steps` training steps of `ref` at lr 1e-2 with `shape` on nproc processes: rank 0's records
// (run directory ref.dir / "train-<name>").
std::vector<StepRecord> train_steps(const Reference& ref, const std::string& name, int nproc,
                                    const std::vector<std::string>& shape, int steps = 3) {
  fs::path d = ref.dir / ("train-" + name);
  fs::create_directories(d);
  auto args = meshtrain_args(ref, d);
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--steps") args[i + 1] = std::to_string(steps);
  for (auto a : {"--lr", "1e-2", "--warmup-steps", "0"}) args.push_back(a);
  if (nproc > 1) {
    args.push_back("--nproc-per-node");
    args.push_back(std::to_string(nproc));
  }
  args.insert(args.end(), shape.begin(), shape.end());
  EXPECT_EQ(run(args, d), 0) << name << ": " << slurp(d / "stderr.txt") << slurp(d / "rank0.log");
  return steps_of(d);
}

// Mixtures of experts (config output_router_logits true): transformers' loss is the mean over
// forward calls of one sequence each (meshtrain's micro-batch 1), each with coef x its own
// load-balancing loss. Data parallel ranks each run such calls; cp and tp (sequence parallel)
// ranks each hold part of a call's tokens and sum its routing statistics, so the loss is the same.
TEST(HfLoad, Qwen3MoeWithADenseLayerEveryShapeTrains) {
  auto ref = make_reference("qwen3_moe", {"qwen3_moe", "--kv-heads", "2", "--micro-batch", "1", "--shard-kb", "40"});
  // Training: 3 steps on 1 process and on three 4- and 2-rank shapes (checkpointing with tp)
  // follow the same losses within 1e-4; the first (before any update) is transformers'.
  const auto one = train_steps(ref, "1", 1, {});
  ASSERT_EQ(one.size(), 3u);
  EXPECT_LT(std::abs(one[0].loss - ref.loss) / ref.loss, 1e-5) << one[0].loss << " vs transformers " << ref.loss;
  EXPECT_LT(one[2].loss, one[0].loss);
  const std::vector<std::pair<std::string, std::vector<std::string>>> shapes = {
      {"rep2shard2", kHsdp},
      {"shard2tp2-ckpt", {"--dp-shard", "2", "--tp", "2", "--activation-checkpointing", "full"}},
      {"cp2", kCp}};
  for (const auto& [name, shape] : shapes) {
    const auto other = train_steps(ref, name, name == "cp2" ? 2 : 4, shape);
    ASSERT_EQ(other.size(), 3u) << name;
    for (size_t i = 0; i < 3; ++i)
      EXPECT_LT(std::abs(other[i].loss - one[i].loss) / one[i].loss, 1e-4)
          << name << " step " << i << ": " << other[i].loss << " vs " << one[i].loss;
    // The routing metrics are over the global batch: the same for every shape.
    ASSERT_TRUE(other[0].moe && one[0].moe) << name;
    for (size_t l = 0; l < 2; ++l) EXPECT_EQ(other[0].moe->layers[l].tokens, one[0].moe->layers[l].tokens) << name;
    EXPECT_NEAR(other[0].moe->aux_loss, one[0].moe->aux_loss, 1e-6) << name;  // fp32 sums in another order
  }
  // Sparse layers 0 and 2 (layer 1 is dense), 4 x 32 tokens x 2 experts each.
  ASSERT_EQ(one[0].moe->layers.size(), 2u);
  EXPECT_EQ(one[0].moe->layers[1].layer, 2);
  for (const ExpertLoad& l : one[0].moe->layers) {
    double sum = 0;
    for (double t : l.tokens) sum += t;
    EXPECT_EQ(sum, kBatch * kSeqLen * 2);
    EXPECT_GE(l.imbalance, 1.0);
  }
  EXPECT_GT(one[0].moe->aux_loss, 1.0);
}

// `other`'s losses follow `one`'s within 1e-4 and every step routed the same tokens to each
// expert of each sparse layer (the routing metrics are over the global batch and every stage).
void expect_same_training(const std::vector<StepRecord>& one, const std::vector<StepRecord>& other,
                          const std::string& name) {
  ASSERT_EQ(other.size(), one.size()) << name;
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_LT(std::abs(other[i].loss - one[i].loss) / one[i].loss, 1e-4)
        << name << " step " << i << ": " << other[i].loss << " vs " << one[i].loss;
    ASSERT_TRUE(other[i].moe && one[i].moe) << name;
    ASSERT_EQ(other[i].moe->layers.size(), one[i].moe->layers.size()) << name;
    for (size_t l = 0; l < one[i].moe->layers.size(); ++l)
      EXPECT_EQ(other[i].moe->layers[l].tokens, one[i].moe->layers[l].tokens) << name << " step " << i;
    EXPECT_NEAR(other[i].moe->aux_loss, one[i].moe->aux_loss, 1e-6) << name << " step " << i;
  }
}

// Pipeline stages cut a forward call's sparse layers over ranks (Qwen3-MoE: sparse layers 0 and 2
// on different stages); the routing travels with the schedule so the aux loss and its gradient
// are the call's. With the aux loss trained on (output_router_logits true), 3 steps at pp 2,
// pp 2 x dp_shard 2 and pp 2 x tp 2 with checkpointing follow one process; the first is
// transformers' loss.
TEST(HfLoad, Qwen3MoePipelineStagesTrain) {
  auto ref = make_reference("qwen3_moe_pp", {"qwen3_moe", "--kv-heads", "2", "--micro-batch", "1"});
  const auto one = train_steps(ref, "1", 1, {});
  ASSERT_EQ(one.size(), 3u);
  EXPECT_LT(one[2].loss, one[0].loss);
  const std::vector<std::pair<std::string, std::vector<std::string>>> shapes = {
      {"pp2", {"--pp", "2"}},
      {"pp2shard2", {"--pp", "2", "--dp-shard", "2"}},
      {"pp2tp2-ckpt", {"--pp", "2", "--tp", "2", "--activation-checkpointing", "full"}}};
  for (const auto& [name, shape] : shapes) {
    const auto other = train_steps(ref, name, name == "pp2" ? 2 : 4, shape);
    ASSERT_FALSE(other.empty()) << name;
    EXPECT_LT(std::abs(other[0].loss - ref.loss) / ref.loss, 1e-4) << name << ": " << other[0].loss
                                                                  << " vs transformers " << ref.loss;
    expect_same_training(one, other, name);
  }
}

TEST(HfLoad, MixtralPipelineStagesTrain) {
  auto ref = make_reference("mixtral_pp", {"mixtral", "--kv-heads", "2", "--micro-batch", "1"});
  const auto one = train_steps(ref, "1", 1, {});
  const auto pp2 = train_steps(ref, "pp2-gpipe", 2, {"--pp", "2", "--pp-schedule", "gpipe"});
  ASSERT_FALSE(pp2.empty());
  EXPECT_LT(std::abs(pp2[0].loss - ref.loss) / ref.loss, 1e-4) << pp2[0].loss << " vs transformers " << ref.loss;
  expect_same_training(one, pp2, "pp2-gpipe");
}

// Expert parallelism (trainer/parallelize_ep.h): ep borrows its ranks from dp_shard x cp x tp,
// each ep rank holds 4/ep experts, rows travel by all-to-all. The loss before any update is
// transformers' at ep 2 x dp_shard 2, ep 2 over dp_shard 4 (efsdp 2), ep 2 with tp 2, ep 4 over
// dp_shard 4; 10 steps at dp_replicate 2 x dp_shard 2 x tp 2 and at dp_shard 2 x cp 2 x tp 2
// (checkpointing), both ep 2, follow one process within 1e-4 with the same expert loads; the
// export of the first gives transformers meshtrain's eval loss; a resume at the same ep equals
// the uninterrupted run, and at ep 4 follows it.
TEST(HfLoad, Qwen3MoeExpertParallelTrainsExportsAndResumes) {
  auto ref = make_reference("qwen3_moe_ep", {"qwen3_moe", "--kv-heads", "2", "--micro-batch", "1"});
  const std::vector<std::pair<std::string, std::vector<std::string>>> before = {
      {"shard2ep2", {"--nproc-per-node", "2", "--dp-shard", "2", "--ep", "2"}},
      {"shard2tp2ep2", {"--nproc-per-node", "4", "--dp-shard", "2", "--tp", "2", "--ep", "2"}},
      {"shard4ep4", {"--nproc-per-node", "4", "--dp-shard", "4", "--ep", "4"}}};
  for (const auto& [name, shape] : before) {
    const double got = meshtrain_loss(ref, name, 0, shape);
    EXPECT_LT(std::abs(got - ref.loss) / ref.loss, 1e-4) << name << ": meshtrain " << got << " vs transformers " << ref.loss;
  }
  {
    // Without sequence parallelism every tp rank holds the same rows: refused by name.
    const fs::path d = ref.dir / "run-no-sp";
    fs::create_directories(d);
    std::ofstream(d / "run.json") << R"({"training":{"sequence_parallel":false}})";
    auto args = meshtrain_args(ref, d);
    for (const std::string& a : std::vector<std::string>{"--config", (d / "run.json").string(), "--nproc-per-node", "4",
                                                        "--dp-shard", "2", "--tp", "2", "--ep", "2"})
      args.push_back(a);
    EXPECT_EQ(run(args, d), 2);
    EXPECT_NE(slurp(d / "stderr.txt").find("--ep: 2: 1 when tp > 1 runs without sequence parallelism"), std::string::npos)
        << slurp(d / "stderr.txt");
  }

  const auto one = train_steps(ref, "1", 1, {}, 10);
  ASSERT_EQ(one.size(), 10u);
  EXPECT_LT(std::abs(one[0].loss - ref.loss) / ref.loss, 1e-5);
  const fs::path tokens = ref.dir / "tokens.bin";
  const std::vector<std::pair<std::string, std::vector<std::string>>> shapes = {
      {"rep2shard2tp2ep2", {"--dp-replicate", "2", "--dp-shard", "2", "--tp", "2", "--ep", "2", "--eval-data",
                            tokens.string(), "--checkpoint-every", "10"}},
      {"shard2cp2tp2ep2-ckpt",
       {"--dp-shard", "2", "--cp", "2", "--tp", "2", "--ep", "2", "--activation-checkpointing", "full"}},
      {"pp2shard2tp2ep2", {"--pp", "2", "--dp-shard", "2", "--tp", "2", "--ep", "2"}}};
  for (const auto& [name, shape] : shapes) {
    const auto other = train_steps(ref, name, 8, shape, 10);
    ASSERT_EQ(other.size(), 10u) << name;
    for (size_t i = 0; i < 10; ++i)
      EXPECT_LT(std::abs(other[i].loss - one[i].loss) / one[i].loss, 1e-4)
          << name << " step " << i << ": " << other[i].loss << " vs " << one[i].loss;
    for (size_t i : {size_t{0}, size_t{9}}) {
      ASSERT_TRUE(other[i].moe && one[i].moe) << name;
      for (size_t l = 0; l < 2; ++l)
        EXPECT_EQ(other[i].moe->layers[l].tokens, one[i].moe->layers[l].tokens) << name << " step " << i;
    }
    EXPECT_GT(other[0].comm_ep_s, 0.0) << name;
  }

  // The export of the ep run's step 10: transformers' loss equals meshtrain's eval loss.
  const fs::path run_dir = ref.dir / "train-rep2shard2tp2ep2";
  double eval_loss = 0;
  {
    std::ifstream in(run_dir / "metrics-rank0.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto rec = parse_metrics_line(line);
      if (rec.ok() && std::holds_alternative<EvalRecord>(*rec)) eval_loss = std::get<EvalRecord>(*rec).loss;
    }
  }
  ASSERT_GT(eval_loss, 0);
  ASSERT_EQ(run({MESHTRAIN_BIN, "export", "--checkpoint", (run_dir / "checkpoints").string(), "--out",
                         (run_dir / "hf").string()}, run_dir), 0) << slurp(run_dir / "stderr.txt");
  const fs::path hf_loss = fs::path(HF_REFERENCE_PY).parent_path() / "hf" / "hf_loss.py";
  ASSERT_EQ(run({MESHWORK_PYTHON, hf_loss.string(), (run_dir / "hf").string(), tokens.string(), "32", "4", "1"}, run_dir),
            0) << slurp(run_dir / "stderr.txt");
  const std::string text = slurp(run_dir / "stdout.txt");
  const double hf = std::stod(text.substr(text.find_last_of('\n', text.size() - 2) + 1));
  EXPECT_LT(std::abs(hf - eval_loss) / eval_loss, 1e-5) << "transformers " << hf << " vs meshtrain " << eval_loss;

  // Resume from the step-3 checkpoint of a 6-step ep 2 run over dp_shard 4 (efsdp 2).
  const std::vector<std::string> shard4 = {"--dp-shard", "4", "--ep", "2", "--checkpoint-every", "3"};
  const auto full = train_steps(ref, "full", 4, shard4, 6);
  ASSERT_EQ(full.size(), 6u);
  EXPECT_LT(std::abs(full[0].loss - ref.loss) / ref.loss, 1e-4) << "dp_shard 4 ep 2";
  const fs::path kept = ref.dir / "train-full" / "checkpoints";
  fs::remove_all(kept / "step-00000006");
  for (const std::string ep : {"2", "4"}) {
    const auto resumed = train_steps(ref, "resume-ep" + ep, 4,
                                     {"--dp-shard", "4", "--ep", ep, "--resume", "--checkpoint-dir", kept.string()}, 6);
    ASSERT_EQ(resumed.size(), 3u) << "ep " << ep;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(resumed[i].step, static_cast<int64_t>(i + 3));
      if (ep == "2")
        EXPECT_EQ(resumed[i].loss, full[i + 3].loss) << "step " << i + 3;
      else
        EXPECT_LT(std::abs(resumed[i].loss - full[i + 3].loss) / full[i + 3].loss, 1e-5) << "ep 4, step " << i + 3;
    }
  }
}

// Mixtral's block_sparse_moe names, and expert parallelism in bf16: the rows cross the
// all-to-all in bf16 and the experts' GEMMs run in bf16, so ep 2 must give one bf16 process's
// loss (the same sums in the same order), and both stay within bf16's reach of transformers' fp32.
TEST(HfLoad, MixtralExpertsAndExpertParallelInBf16) {
  auto ref = make_reference("mixtral", {"mixtral", "--kv-heads", "2", "--micro-batch", "1"});
  expect_loss(ref, "1", 1, {});
  const std::vector<std::string> bf16 = {"--precision", "bf16"};
  const double one = meshtrain_loss(ref, "1-bf16", 1, bf16);
  const double ep2 = meshtrain_loss(ref, "shard2ep2-bf16", 2, {"--dp-shard", "2", "--ep", "2"}, bf16);
  EXPECT_LT(std::abs(ep2 - one) / one, 1e-4) << "bf16: ep 2 " << ep2 << " vs one process " << one;
  EXPECT_LT(std::abs(one - ref.loss) / ref.loss, 5e-3) << "bf16 " << one << " vs transformers (fp32) " << ref.loss;
  EXPECT_NE(one, ref.loss) << "--precision bf16 changed nothing";
}

TEST(HfLoad, OlmoeWholeProjectionQkNormsAndTpRefusedByName) {
  auto ref = make_reference("olmoe", {"olmoe", "--kv-heads", "2", "--micro-batch", "1"});
  expect_loss(ref, "1", 1, {});
  fs::path d = ref.dir / "run-tp2";
  fs::create_directories(d);
  auto args = meshtrain_args(ref, d);
  for (auto a : {"--nproc-per-node", "2", "--tp", "2"}) args.push_back(a);
  EXPECT_EQ(run(args, d), 2);
  EXPECT_NE(slurp(d / "stderr.txt").find("--tp: 2: 1 for olmoe"), std::string::npos) << slurp(d / "stderr.txt");
}

TEST(HfLoad, Bf16CheckpointConvertsOnce) {
  auto ref = make_reference("bf16", {"llama", "--kv-heads", "2", "--dtype", "bfloat16"});
  expect_loss(ref, "1", 1, {});
  expect_loss(ref, "shard2tp2", 4, kShardTp);
}

// A checkpoint edited after saving: meshtrain refuses it before training, naming file and tensor.
std::string refusal(const Reference& ref, const std::string& name) {
  fs::path d = ref.dir / ("run-" + name);
  fs::create_directories(d);
  EXPECT_EQ(run(meshtrain_args(ref, d), d), 2) << slurp(d / "rank0.log");
  return slurp(d / "stderr.txt");
}

// `text` (meshtrain's stderr) holds `line` as one whole line.
void expect_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  std::string l;
  bool found = false;
  while (std::getline(in, l)) found = found || l + "\n" == line;
  EXPECT_TRUE(found) << "no line\n  " << line << "in\n" << text;
}

// Rewrites model.safetensors' header with `edit` applied (the data section is kept as is).
void edit_header(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  std::string bytes = slurp(file);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  edit(header);
  std::string text = header.dump();
  text.resize(n, ' ');  // the same length: data offsets stay valid
  ASSERT_EQ(text.size(), n);
  std::ofstream out(file, std::ios::binary);
  out.write(bytes.data(), 8);
  out << text << bytes.substr(8 + n);
}

TEST(HfLoad, MissingTensorAndWrongShapeAreRefusedNamingFileAndTensor) {
  auto ref = make_reference("broken", {"llama", "--kv-heads", "2"});
  const fs::path file = ref.dir / "model" / "model.safetensors";
  // Missing: rename the tensor (same length, so the header keeps its size).
  edit_header(file, [](nlohmann::json& h) {
    h["model.layers.1.mlp.up_proj.wEight"] = h["model.layers.1.mlp.up_proj.weight"];
    h.erase("model.layers.1.mlp.up_proj.weight");
  });
  expect_line(refusal(ref, "missing"),
            "meshtrain: " + file.string() +
                ": no tensor model.layers.1.mlp.up_proj.weight: every tensor of a llama model with this "
                "config.json\n");
  // Wrong shape: config.json says intermediate_size 72, the tensor claims [36, 96] (same bytes).
  edit_header(file, [](nlohmann::json& h) {
    h["model.layers.1.mlp.up_proj.weight"] = h["model.layers.1.mlp.up_proj.wEight"];
    h.erase("model.layers.1.mlp.up_proj.wEight");
    h["model.layers.0.mlp.gate_proj.weight"]["shape"] = {36, 96};
  });
  expect_line(refusal(ref, "shape"),
            "meshtrain: " + file.string() +
                ": model.layers.0.mlp.gate_proj.weight: shape [36, 96]: [72, 48] as config.json says "
                "(hidden_size 48, intermediate_size 72, heads 6/2 x head_dim 8, vocab_size 250)\n");
}

}  // namespace

namespace {

// A directory holding only config.json (the tiny preset's): `--init hf` has nothing to read, and
// a RoPE scaling meshtrain does not implement is refused by name before any rank starts.
TEST(HfLoad, InitHfWithoutWeightsAndUnknownRopeAreRefused) {
  const fs::path dir = temp_dir("config-only"), model = dir / "model";
  fs::create_directories(model);
  nlohmann::json cfg = nlohmann::json::parse(slurp(fs::path(MESHWORK_RESOURCE_DIR) / "models" / "tiny.json"));
  std::ofstream(model / "config.json") << cfg.dump();
  auto args = [&](const fs::path& run) {
    return std::vector<std::string>{MESHTRAIN_BIN, "--model", model.string(), "--steps", "1", "--seq-len", "16",
                                    "--global-batch", "1", "--peak-tflops", "1", "--run-dir", run.string(),
                                    "--master-port", std::to_string(free_tcp_port())};
  };
  fs::create_directories(dir / "auto");
  EXPECT_EQ(run(args(dir / "auto"), dir / "auto"), 0) << slurp(dir / "auto" / "stderr.txt");  // auto: random
  fs::create_directories(dir / "hf");
  auto hf = args(dir / "hf");
  hf.push_back("--init");
  hf.push_back("hf");
  EXPECT_EQ(run(hf, dir / "hf"), 2);
  expect_line(slurp(dir / "hf" / "stderr.txt"),
              "meshtrain: --init: hf: --model " + model.string() +
                  ": a Hugging Face directory holding model.safetensors or model.safetensors.index.json "
                  "(or --init random)\n");
  cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  std::ofstream(model / "config.json") << cfg.dump();
  fs::create_directories(dir / "yarn");
  EXPECT_EQ(run(args(dir / "yarn"), dir / "yarn"), 2);
  EXPECT_EQ(slurp(dir / "yarn" / "stderr.txt"),
            "meshtrain: --model: " + model.string() +
                ": model.rope_scaling.rope_type: yarn: default or llama3 (the RoPE scalings meshtrain implements)\n");
}

}  // namespace

namespace {

// `meshtrain --check` opens the checkpoint's headers and checks them against config.json (no
// rank starts, no tensor data is read): a good checkpoint passes with a summary line, a shape
// that disagrees is refused with the same message a run gives.
TEST(HfLoad, CheckComparesCheckpointHeadersWithConfig) {
  auto ref = make_reference("check", {"llama", "--kv-heads", "2", "--shard-kb", "30"});
  const fs::path d = ref.dir / "run-check";
  fs::create_directories(d);
  auto args = meshtrain_args(ref, d);
  for (auto a : {"--check", "--nproc-per-node", "4", "--dp-shard", "2", "--tp", "2"}) args.push_back(a);
  ASSERT_EQ(run(args, d), 0) << slurp(d / "stderr.txt");
  // 2 layers x 9 tensors + embed, norm, lm_head.
  EXPECT_NE(slurp(d / "stdout.txt").find("meshtrain: ok: checkpoint " + (ref.dir / "model").string() +
                                         ": 21 tensors match config.json ("),
            std::string::npos)
      << slurp(d / "stdout.txt");
  EXPECT_FALSE(fs::exists(d / "rank0.log"));  // nothing started
  auto index = nlohmann::json::parse(slurp(ref.dir / "model" / "model.safetensors.index.json"));
  const fs::path shard = ref.dir / "model" / index["weight_map"]["model.layers.1.self_attn.k_proj.weight"].get<std::string>();
  edit_header(shard, [](nlohmann::json& h) { h["model.layers.1.self_attn.k_proj.weight"]["shape"] = {48, 16}; });
  EXPECT_EQ(run(args, d), 2);
  expect_line(slurp(d / "stderr.txt"),
              "meshtrain: " + shard.string() +
                  ": model.layers.1.self_attn.k_proj.weight: shape [48, 16]: [16, 48] as config.json says "
                  "(hidden_size 48, intermediate_size 72, heads 6/2 x head_dim 8, vocab_size 250)\n");
}

// --resume from meshtrain's own checkpoint never reads the Hugging Face weights it started from
// (they are overwritten anyway): with model.safetensors broken after the first run, a resume
// still works and says so in its log, while a fresh start is refused.
TEST(HfLoad, ResumeDoesNotReadTheHfCheckpoint) {
  auto ref = make_reference("resume", {"llama", "--kv-heads", "2"});
  const fs::path d = ref.dir / "run-resume";
  fs::create_directories(d);
  auto args = meshtrain_args(ref, d);
  for (auto a : {"--checkpoint-every", "1"}) args.push_back(a);
  ASSERT_EQ(run(args, d), 0) << slurp(d / "stderr.txt") << slurp(d / "rank0.log");
  // A header length past the end of the file: any read of the checkpoint is refused.
  const fs::path file = ref.dir / "model" / "model.safetensors";
  std::ofstream(file, std::ios::binary | std::ios::trunc) << std::string("\xff\xff\xff\x00\x00\x00\x00\x00{}", 10);
  auto resume = args;
  for (auto a : {"--resume", "--steps", "2"}) resume.push_back(a);
  ASSERT_EQ(run(resume, d), 0) << slurp(d / "stderr.txt") << slurp(d / "rank0.log");
  const std::string log = slurp(d / "rank0.log");
  EXPECT_NE(log.find("initial weights: --resume from " + (d / "checkpoints" / "step-00000001").string() +
                     "; the Hugging Face checkpoint " + (ref.dir / "model").string() + " is not read"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("resumed from "), std::string::npos) << log;
  const fs::path fresh = ref.dir / "run-fresh";
  fs::create_directories(fresh);
  EXPECT_EQ(run(meshtrain_args(ref, fresh), fresh), 2) << slurp(fresh / "stderr.txt");
}

// Sliding-window attention in configs written by transformers itself: a window shorter than the
// trained seq_len is refused by name (meshtrain computes full attention); a null window, one at
// least seq_len long, or Qwen2's flag off is full attention and fine.
TEST(HfLoad, SlidingWindowShorterThanSeqLenIsRefusedByName) {
  const fs::path dir = temp_dir("sliding");
  ASSERT_EQ(run({MESHWORK_PYTHON, SLIDING_WINDOW_CONFIGS_PY, dir.string()}, dir), 0) << slurp(dir / "stderr.txt");
  auto check = [&](const std::string& name, int seq_len) {
    const fs::path d = dir / ("run-" + name + "-" + std::to_string(seq_len));
    fs::create_directories(d);
    const int rc = run({MESHTRAIN_BIN, "--check", "--model", (dir / name).string(), "--seq-len", std::to_string(seq_len),
                        "--global-batch", "4", "--micro-batch", "1"},
                       d);
    return std::pair{rc, slurp(d / "stderr.txt")};
  };
  auto [rc, err] = check("mistral-window16", 32);
  EXPECT_EQ(rc, 2);
  expect_line(err,
              "meshtrain: model.sliding_window: 16: at least seq_len (32): meshtrain computes full causal "
              "attention, and sliding_window puts a 16-token window on every layer (train with seq_len <= 16, "
              "or a config without the window)\n");
  std::tie(rc, err) = check("qwen2-window16", 32);
  EXPECT_EQ(rc, 2);
  expect_line(err,
              "meshtrain: model.sliding_window: 16: at least seq_len (32): meshtrain computes full causal "
              "attention, and layer_types puts a 16-token window on layers 1..1 (train with seq_len <= 16, "
              "or a config without the window)\n");
  for (const char* ok : {"mistral-null", "mistral-default", "qwen2-off"})
    EXPECT_EQ(check(ok, 32).first, 0) << ok << ": " << check(ok, 32).second;
  EXPECT_EQ(check("mistral-window16", 16).first, 0) << check("mistral-window16", 16).second;
  EXPECT_EQ(check("qwen2-window16", 16).first, 0) << check("qwen2-window16", 16).second;
}

}  // namespace
