// `meshtrain export`, --eval-data and --save-hf with the real binary, real Gloo ranks and the
// real reference libraries:
//   - the export of a checkpoint saved at dp_shard 2 x tp 2 (and cp 2 x tp 2) is byte-identical
//     to the export of the same weights saved by one process (the weights are kept equal by a
//     learning rate too small to move any fp32 weight), and their eval losses agree;
//   - a model trained 20 steps at dp_shard 2 x tp 2 and saved with --save-hf loads in
//     transformers' AutoModelForCausalLM, whose loss on the held-out batch equals meshtrain's
//     eval loss within 1e-4 relative;
//   - sharding under a small --max-shard-size (index + shards holding the same tensors);
//   - atomicity: an export killed after its first file leaves no output directory; an existing
//     output is refused unless --force.
#include <gtest/gtest.h>

#include "tests/scratch_dirs.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/metrics.h"
#include "tests/trainer/meshtrain_runs.h"
#include "trainer/free_port.h"
#include "trainer/hf/safetensors.h"

namespace fs = std::filesystem;
using namespace meshwork;
using namespace meshwork::trainer::hf;
using meshwork::test::evals_of;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("hf-export-test-" + std::to_string(getpid()));
  return ::meshwork::test::fresh_scratch_dir(root, root / name);  // removed when every test passed
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs meshtrain with args (env: extra NAME=VALUE), output to dir/stdout.txt, stderr.txt.
int run(const std::vector<std::string>& args, const fs::path& dir, const std::vector<std::string>& env = {}) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen((dir / "stdout.txt").c_str(), "w", stdout)) _exit(126);
    if (!freopen((dir / "stderr.txt").c_str(), "w", stderr)) _exit(126);
    for (const auto& e : env) putenv(strdup(e.c_str()));
    std::vector<std::string> a = {MESHTRAIN_BIN};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(MESHTRAIN_BIN, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string logs(const fs::path& d) { return slurp(d / "stderr.txt") + slurp(d / "rank0.log"); }

// A held-out llm.c shard (magic 20240520, uint16 tokens): the last n tokens of the bundled
// corpus, which the short training runs here never reach (they read its first sequences).
fs::path write_eval_shard(const fs::path& dir, int64_t n) {
  std::ifstream corpus(std::string(MESHWORK_SOURCE_DIR) + "/resources/data/kjv.bin", std::ios::binary);
  std::vector<int32_t> header(256, 0);
  corpus.read(reinterpret_cast<char*>(header.data()), 256 * 4);
  EXPECT_EQ(header[0], 20240520);
  const int64_t total = header[2];
  std::vector<uint16_t> tokens(n);
  corpus.seekg(256 * 4 + (total - n) * 2);
  corpus.read(reinterpret_cast<char*>(tokens.data()), n * 2);
  EXPECT_TRUE(corpus.good());
  header[2] = static_cast<int32_t>(n);
  const fs::path p = dir / "eval.bin";
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 256 * 4);
  out.write(reinterpret_cast<const char*>(tokens.data()), n * 2);
  return p;
}

std::vector<std::string> train_args(const fs::path& dir, int steps, const std::string& lr) {
  return {"--model", "tiny", "--steps", std::to_string(steps), "--seq-len", "64", "--global-batch", "8",
          "--micro-batch", "1", "--lr", lr, "--warmup-steps", "2", "--peak-tflops", "1",
          "--run-dir", dir.string(), "--master-port", std::to_string(free_tcp_port())};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One step at a learning rate that moves no fp32 weight (1e-30 x an update of order one is far
// below the last bit of weights of order 0.02..1), checkpointed, then exported: the weights of
// the initial model, whatever the shape saved them.
fs::path export_of_initial_weights(const std::string& name, int nproc, const std::vector<std::string>& shape,
                                   const fs::path& eval, double* eval_loss) {
  const fs::path d = temp_dir(name);
  auto args = plus(train_args(d, 1, "1e-30"), {"--checkpoint-every", "1", "--eval-data", eval.string(),
                                               "--eval-batches", "2"});
  if (nproc > 1) args = plus(plus(args, {"--nproc-per-node", std::to_string(nproc)}), shape);
  EXPECT_EQ(run(args, d), 0) << logs(d);
  auto evals = evals_of(d / "metrics-rank0.jsonl");
  EXPECT_EQ(evals.size(), 1u);
  if (!evals.empty()) *eval_loss = evals.back().loss;
  const fs::path out = d / "hf";
  EXPECT_EQ(run({"export", "--checkpoint", (d / "checkpoints").string(), "--out", out.string()}, d), 0)
      << slurp(d / "stderr.txt");
  return out;
}

}  // namespace

TEST(HfExport, ShardedAndTensorParallelCheckpointsExportTheSameBytes) {
  const fs::path eval = write_eval_shard(temp_dir("eval-data"), 64 * 16 + 1);
  double loss1 = 0, loss_tp = 0, loss_cp = 0;
  const fs::path one = export_of_initial_weights("one", 1, {}, eval, &loss1);
  const fs::path tp = export_of_initial_weights("shard2tp2", 4, {"--dp-shard", "2", "--tp", "2"}, eval, &loss_tp);
  const fs::path cp = export_of_initial_weights("cp2tp2", 4, {"--cp", "2", "--tp", "2"}, eval, &loss_cp);
  const std::string ref = slurp(one / "model.safetensors");
  ASSERT_GT(ref.size(), 100000u);  // tiny: ~0.2 M fp32 parameters
  EXPECT_TRUE(slurp(tp / "model.safetensors") == ref) << "dp_shard 2 x tp 2 export differs";
  EXPECT_TRUE(slurp(cp / "model.safetensors") == ref) << "cp 2 x tp 2 export differs";
  EXPECT_EQ(slurp(tp / "config.json"), slurp(one / "config.json"));
  // Every tensor is there, fp32, with HF's names and shapes.
  auto f = SafetensorsFile::open(one / "model.safetensors");
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->names().size(), 3u + 2u * 9u);  // embed, norm, head + 2 layers x 9
  const TensorInfo* k = f->find("model.layers.1.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{32, 64}));  // 4 kv heads x 8, hidden 64
  EXPECT_EQ(k->dtype, Dtype::F32);
  // The eval loss of the same weights does not depend on the shape.
  ASSERT_GT(loss1, 0);
  EXPECT_LT(std::abs(loss_tp - loss1) / loss1, 1e-5) << loss_tp << " vs " << loss1;
  EXPECT_LT(std::abs(loss_cp - loss1) / loss1, 1e-5) << loss_cp << " vs " << loss1;
}

TEST(HfExport, ShardsAboveMaxShardSizeWithAnIndex) {
  const fs::path d = temp_dir("sharding");
  ASSERT_EQ(run(plus(train_args(d, 2, "1e-3"), {"--checkpoint-every", "2"}), d), 0) << logs(d);
  ASSERT_EQ(run({"export", "--checkpoint", (d / "checkpoints").string(), "--out", (d / "single").string()}, d), 0)
      << slurp(d / "stderr.txt");
  ASSERT_EQ(run({"export", "--checkpoint", (d / "checkpoints" / "step-00000002").string(), "--out",
                 (d / "sharded").string(), "--max-shard-size", "100KB"}, d), 0)
      << slurp(d / "stderr.txt");
  EXPECT_FALSE(fs::exists(d / "single" / "model.safetensors.index.json"));
  ASSERT_TRUE(fs::exists(d / "sharded" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(d / "sharded" / "model.safetensors"));
  auto index = nlohmann::json::parse(slurp(d / "sharded" / "model.safetensors.index.json"));
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  // tiny: embed and head 64 KB each, each layer ~66 KB: several shards, none above 100 KB
  // unless it holds a single tensor.
  EXPECT_GE(files.size(), 3u);
  int64_t total = 0;
  for (const std::string& file : files) {
    auto shard = SafetensorsFile::open(d / "sharded" / file);
    ASSERT_TRUE(shard.ok()) << shard.error().message();
    int64_t bytes = 0;
    for (const auto& n : shard->names()) bytes += static_cast<int64_t>(shard->find(n)->end - shard->find(n)->begin);
    if (shard->names().size() > 1) {
      EXPECT_LE(bytes, 100000) << file;
    }
    total += bytes;
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), total);
  // The same tensors as the single file, bit for bit.
  auto single = SafetensorsFile::open(d / "single" / "model.safetensors");
  auto sharded = SafetensorsIndex::open(d / "sharded");
  ASSERT_TRUE(single.ok() && sharded.ok());
  EXPECT_EQ(sharded->names(), single->names());
  for (const std::string& n : single->names()) {
    auto found = sharded->find(n);
    ASSERT_TRUE(found.ok()) << n;
    auto a = single->bytes(*single->find(n));
    auto b = found->file->bytes(*found->info);
    ASSERT_EQ(a.size(), b.size()) << n;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << n;
  }
}

TEST(HfExport, KilledExportLeavesNoOutputAndExistingOutputNeedsForce) {
  ::umask(022);  // the exports below inherit it
  const fs::path d = temp_dir("atomic");
  ASSERT_EQ(run(plus(train_args(d, 1, "1e-3"), {"--checkpoint-every", "1"}), d), 0) << logs(d);
  const fs::path out = d / "hf";
  const std::vector<std::string> export_args = {"export", "--checkpoint", (d / "checkpoints").string(), "--out",
                                                out.string(), "--max-shard-size", "100KB"};
  // Dies (as by SIGKILL) right after the first shard file is complete.
  EXPECT_EQ(run(export_args, d, {"MESHTRAIN_EXPORT_ABORT_AFTER=1"}), 137);
  EXPECT_FALSE(fs::exists(out));
  ASSERT_EQ(run(export_args, d), 0) << slurp(d / "stderr.txt");
  ASSERT_TRUE(fs::exists(out / "config.json"));
  // Published with the usual directory mode (the umask's: 022 here), not mkdtemp's private 0700.
  EXPECT_NE(fs::status(out).permissions() & fs::perms::others_read, fs::perms::none);
  EXPECT_EQ(run(export_args, d), 2);
  EXPECT_NE(slurp(d / "stderr.txt").find("--force"), std::string::npos) << slurp(d / "stderr.txt");
  fs::remove(out / "config.json");
  EXPECT_EQ(run(plus(export_args, {"--force"}), d), 0) << slurp(d / "stderr.txt");
  EXPECT_TRUE(fs::exists(out / "config.json"));
  // Only the killed export left its temporary directory; finished ones leave none.
  int temporaries = 0;
  for (const auto& e : fs::directory_iterator(d))
    if (e.path().filename().string().rfind("hf.tmp-", 0) == 0) ++temporaries;
  EXPECT_EQ(temporaries, 1);
}

// A run whose --model is a directory: its tokenizer files travel into the export unchanged, the
// config.json says what was trained; --dtype bf16 writes each weight rounded to nearest even.
TEST(HfExport, CopiesTokenizerFilesAndWritesBf16) {
  const fs::path d = temp_dir("tokenizer");
  const fs::path model = d / "model";
  fs::create_directories(model);
  fs::copy_file(fs::path(MESHWORK_SOURCE_DIR) / "resources" / "models" / "tiny.json", model / "config.json");
  const std::vector<std::string> files = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                          "generation_config.json"};
  for (const auto& f : files) std::ofstream(model / f) << "{\"file\": \"" << f << "\"}\n";
  std::ofstream(model / "notes.txt") << "not a tokenizer file\n";
  auto args = train_args(d, 1, "1e-3");
  args[1] = model.string();
  ASSERT_EQ(run(plus(args, {"--checkpoint-every", "1"}), d), 0) << logs(d);
  ASSERT_EQ(run({"export", "--checkpoint", (d / "checkpoints").string(), "--out", (d / "hf").string()}, d), 0)
      << slurp(d / "stderr.txt");
  for (const auto& f : files) EXPECT_EQ(slurp(d / "hf" / f), slurp(model / f)) << f;
  EXPECT_FALSE(fs::exists(d / "hf" / "tokenizer.model"));  // absent in the model directory
  EXPECT_FALSE(fs::exists(d / "hf" / "notes.txt"));
  auto config = nlohmann::json::parse(slurp(d / "hf" / "config.json"));
  EXPECT_EQ(config["hidden_size"], 64);
  EXPECT_EQ(config["num_key_value_heads"], 4);
  EXPECT_EQ(config["dtype"], "float32");

  ASSERT_EQ(run({"export", "--checkpoint", (d / "checkpoints").string(), "--out", (d / "bf16").string(),
                 "--dtype", "bf16"}, d), 0)
      << slurp(d / "stderr.txt");
  EXPECT_EQ(nlohmann::json::parse(slurp(d / "bf16" / "config.json"))["dtype"], "bfloat16");
  auto f32 = SafetensorsFile::open(d / "hf" / "model.safetensors");
  auto b16 = SafetensorsFile::open(d / "bf16" / "model.safetensors");
  ASSERT_TRUE(f32.ok() && b16.ok());
  ASSERT_EQ(b16->names(), f32->names());
  for (const std::string& n : f32->names()) {
    const TensorInfo& a = *f32->find(n);
    const TensorInfo& b = *b16->find(n);
    ASSERT_EQ(b.dtype, Dtype::BF16) << n;
    auto fa = f32->bytes(a);
    auto fb = b16->bytes(b);
    ASSERT_EQ(fb.size() * 2, fa.size()) << n;
    for (size_t i = 0; i < fb.size() / 2; ++i) {
      uint32_t u;
      uint16_t h;
      std::memcpy(&u, fa.data() + 4 * i, 4);
      std::memcpy(&h, fb.data() + 2 * i, 2);
      const uint16_t nearest_even = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
      ASSERT_EQ(h, nearest_even) << n << "[" << i << "]";
    }
  }
}

#ifdef MESHWORK_PYTHON
// The acceptance check: train at a tp + dp_shard shape, --save-hf, load in transformers.
TEST(HfExport, TransformersLossEqualsMeshtrainEvalLoss) {
  const fs::path d = temp_dir("transformers");
  const fs::path eval = write_eval_shard(d, 64 * 8 + 1);
  const fs::path out = d / "hf";
  auto args = plus(train_args(d, 20, "1e-3"), {"--nproc-per-node", "4", "--dp-shard", "2", "--tp", "2",
                                               "--eval-data", eval.string(), "--eval-every", "10",
                                               "--save-hf", out.string()});
  ASSERT_EQ(run(args, d), 0) << logs(d);
  auto evals = evals_of(d / "metrics-rank0.jsonl");
  ASSERT_EQ(evals.size(), 2u);  // after steps 9 and 19 (the last one is not repeated)
  EXPECT_EQ(evals[0].step, 9);
  EXPECT_EQ(evals[1].step, 19);
  EXPECT_EQ(evals[1].tokens, 8 * 64);
  EXPECT_LT(evals[1].loss, evals[0].loss);  // it learned something between the two
  const std::string cmd = std::string(MESHWORK_PYTHON) + " " + MESHWORK_SOURCE_DIR + "/tests/trainer/hf/hf_loss.py " +
                          out.string() + " " + eval.string() + " 64 8 > " + (d / "hf_loss.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(d / "hf_loss.txt");
  const std::string text = slurp(d / "hf_loss.txt");
  const double hf_loss = std::stod(text.substr(text.find_last_of('\n', text.size() - 2) + 1));
  std::cout << "eval loss after step 19: meshtrain " << evals[1].loss << ", transformers " << hf_loss
            << ", relative difference " << std::abs(hf_loss - evals[1].loss) / evals[1].loss << "\n";
  EXPECT_LT(std::abs(hf_loss - evals[1].loss) / evals[1].loss, 1e-4)
      << "transformers " << hf_loss << " vs meshtrain " << evals[1].loss;
}
#endif

#ifdef MESHWORK_PYTHON
namespace {

// Runs command (a shell line), its output to dir/<log>; the exit status.
int shell(const std::string& command, const fs::path& log) {
  const std::string line = command + " > " + log.string() + " 2>&1";
  const int status = std::system(line.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Every tensor of `a` is in `b` and the other way round, with the same dtype, shape and bytes.
void expect_same_tensors(const fs::path& a_dir, const fs::path& b_dir) {
  auto a = SafetensorsIndex::open(a_dir);
  auto b = SafetensorsIndex::open(b_dir);
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(b.ok()) << b.error().message();
  ASSERT_EQ(a->names(), b->names());
  ASSERT_GE(a->names().size(), 3u + 2u * 9u);
  int64_t bytes = 0;
  for (const std::string& n : a->names()) {
    auto fa = a->find(n);
    auto fb = b->find(n);
    ASSERT_TRUE(fa.ok() && fb.ok()) << n;
    EXPECT_EQ(fa->info->dtype, fb->info->dtype) << n;
    EXPECT_EQ(fa->info->shape, fb->info->shape) << n;
    auto ba = fa->file->bytes(*fa->info);
    auto bb = fb->file->bytes(*fb->info);
    ASSERT_EQ(ba.size(), bb.size()) << n;
    EXPECT_EQ(std::memcmp(ba.data(), bb.data(), ba.size()), 0) << n << " differs";
    bytes += static_cast<int64_t>(ba.size());
  }
  std::cout << a_dir.string() << ": " << a->names().size() << " tensors, " << bytes << " bytes, equal\n";
}

// The round trip of issue 16: a checkpoint written by transformers' save_pretrained (reference
// args for tests/trainer/hf_reference.py), read by meshtrain at dp_shard 2 x tp 2 (`--init hf`),
// one step at a learning rate too small to move any weight (--steps is at least 1; lr 1e-30 x an
// AdamW step of order one is far below the last bit of weights of order 0.1, and the weight
// decay factor 1 - 1e-30 * 0.1 is exactly 1 in double), and --save-hf: the same tensors, byte for
// byte, and a config.json transformers reads as the same architecture. `dtype` is what the
// export should be (without --dtype: the source's).
void round_trip(const std::string& name, const std::vector<std::string>& reference, const std::string& dtype,
                const std::vector<std::string>& shape = {"--dp-shard", "2", "--tp", "2"}) {
  const fs::path d = temp_dir("roundtrip-" + name);
  std::string cmd = std::string(MESHWORK_PYTHON) + " " + MESHWORK_SOURCE_DIR + "/tests/trainer/hf_reference.py " +
                    d.string();
  for (const auto& a : reference) cmd += " " + a;
  ASSERT_EQ(shell(cmd, d / "reference.txt"), 0) << slurp(d / "reference.txt");
  const fs::path source = d / "model", out = d / "hf";
  const std::vector<std::string> args = {
      "--model", source.string(), "--init", "hf", "--data", (d / "tokens.bin").string(), "--steps", "1",
      "--seq-len", "32", "--global-batch", "4", "--micro-batch", "1", "--lr", "1e-30", "--warmup-steps", "0",
      "--peak-tflops", "1", "--nproc-per-node", "4", "--save-hf", out.string(),
      "--run-dir", d.string(), "--master-port", std::to_string(free_tcp_port())};
  ASSERT_EQ(run(plus(args, shape), d), 0) << logs(d);
  expect_same_tensors(source, out);
  auto config = nlohmann::json::parse(slurp(out / "config.json"));
  EXPECT_EQ(config["dtype"], dtype);
  EXPECT_EQ(config["torch_dtype"], dtype);
  const std::string same = std::string(MESHWORK_PYTHON) + " " + MESHWORK_SOURCE_DIR +
                           "/tests/trainer/hf/same_config.py " + source.string() + " " + out.string();
  EXPECT_EQ(shell(same, d / "same_config.txt"), 0) << slurp(d / "same_config.txt");
}

}  // namespace

TEST(HfExport, RoundTripLlamaShardedUntiedIsByteIdentical) {
  round_trip("llama", {"llama", "--kv-heads", "2", "--shard-kb", "30"}, "float32");
  // The source was sharded (an index), as the test means it to be.
  EXPECT_TRUE(fs::exists(fs::temp_directory_path() / ("hf-export-test-" + std::to_string(getpid())) /
                         "roundtrip-llama" / "model" / "model.safetensors.index.json"));
}

TEST(HfExport, RoundTripQwen2TiedWithBiasesIsByteIdentical) {
  round_trip("qwen2", {"qwen2", "--kv-heads", "2", "--tied"}, "float32");
}

// A bf16 checkpoint trains in fp32 (exact: every bf16 value is an fp32 value) and, without
// --dtype, exports as bf16 again: rounding an exactly-bf16 fp32 value to bf16 gives its bytes back.
TEST(HfExport, RoundTripBf16ExportsBf16ByteIdentical) {
  round_trip("bf16", {"llama", "--kv-heads", "2", "--shard-kb", "20", "--dtype", "bfloat16"}, "bfloat16");
}
// Mixtral's per-expert tensors (block_sparse_moe.experts.E.w1/w2/w3), FSDP-sharded over 4 ranks
// (experts cut at odd places), come back byte for byte under their names.
TEST(HfExport, RoundTripMixtralExpertsShardedIsByteIdentical) {
  round_trip("mixtral", {"mixtral", "--kv-heads", "2"}, "float32", {"--dp-shard", "4"});
}

// A Qwen3-MoE (a dense layer among sparse ones) trained from its transformers checkpoint at
// dp_replicate 2 x dp_shard 2 and exported with `meshtrain export`: transformers' loss of the
// export (the aux loss of each forward call of one sequence included, as meshtrain's
// micro-batches) equals meshtrain's eval loss after the last step.
TEST(HfExport, TrainedMixtureOfExpertsExportGivesTransformersTheEvalLoss) {
  const fs::path d = temp_dir("moe-trained");
  const std::string ref = std::string(MESHWORK_PYTHON) + " " + MESHWORK_SOURCE_DIR + "/tests/trainer/hf_reference.py " +
                          d.string() + " qwen3_moe --kv-heads 2 --micro-batch 1";
  ASSERT_EQ(shell(ref, d / "reference.txt"), 0) << slurp(d / "reference.txt");
  const std::string reference = slurp(d / "reference.txt");  // its last line: transformers' loss
  const double before = std::stod(reference.substr(reference.find_last_of('\n', reference.size() - 2) + 1));
  const fs::path tokens = d / "tokens.bin";
  const std::vector<std::string> args = {
      "--model", (d / "model").string(), "--init", "hf", "--data", tokens.string(), "--steps", "4",
      "--seq-len", "32", "--global-batch", "4", "--micro-batch", "1", "--lr", "1e-2", "--warmup-steps", "0",
      "--peak-tflops", "1", "--nproc-per-node", "4", "--dp-replicate", "2", "--dp-shard", "2",
      "--eval-data", tokens.string(), "--checkpoint-every", "4", "--run-dir", d.string(),
      "--master-port", std::to_string(free_tcp_port())};
  ASSERT_EQ(run(args, d), 0) << logs(d);
  auto evals = evals_of(d / "metrics-rank0.jsonl");
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_LT(evals[0].loss, before - 0.05);  // trained on these very tokens: lower
  const fs::path out = d / "hf";
  ASSERT_EQ(run({"export", "--checkpoint", (d / "checkpoints").string(), "--out", out.string()}, d), 0)
      << slurp(d / "stderr.txt");
  const std::string cmd = std::string(MESHWORK_PYTHON) + " " + MESHWORK_SOURCE_DIR + "/tests/trainer/hf/hf_loss.py " +
                          out.string() + " " + tokens.string() + " 32 4 1";
  ASSERT_EQ(shell(cmd, d / "hf_loss.txt"), 0) << slurp(d / "hf_loss.txt");
  const std::string text = slurp(d / "hf_loss.txt");
  const double hf_loss = std::stod(text.substr(text.find_last_of('\n', text.size() - 2) + 1));
  std::cout << "eval loss after step 4: meshtrain " << evals[0].loss << ", transformers " << hf_loss << "\n";
  EXPECT_LT(std::abs(hf_loss - evals[0].loss) / evals[0].loss, 1e-5)
      << "transformers " << hf_loss << " vs meshtrain " << evals[0].loss;
}
#endif
