// Pipeline stages (pp) in the real meshtrain binary: real processes, real Gloo sends and
// receives over loopback. Parity of every schedule and of pp with each other axis with the
// 1-process run (loss and gradient norm), evaluation through the stages, exact resume (and at
// another cut), a killed stage stopping the run, and what is refused with a message.
//
// The model is tiny with 8 decoder layers (tests/trainer/data/tiny-8-layers): pp 4 with 2 chunks
// per stage needs 8. Global batch 8, micro-batch 1: 8 micro-batches per step on one replica, 4
// with two (enough for each schedule's rule, core/validation.cpp).
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>

#include "core/metrics.h"
#include "tests/trainer/meshtrain_runs.h"

using namespace meshwork;
using namespace meshwork::test;

namespace {

const std::string kModel = std::string(MESHWORK_TRAINER_TEST_DATA) + "/tiny-8-layers/config.json";

// Loss (expect_parity) and also the gradient norm of every step equal the 1-process run's.
void expect_pipeline_parity(const std::string& name, int nproc, const std::vector<std::string>& shape) {
  std::map<int64_t, StepRecord> got;
  expect_parity(name, nproc, shape, kModel, &got);
  const auto& ref = reference_run(kModel);
  ASSERT_EQ(got.size(), ref.size());
  for (const auto& [step, r] : ref)
    EXPECT_LT(std::abs(got.at(step).grad_norm - r.grad_norm) / r.grad_norm, 1e-4)
        << name << " step " << step << ": grad norm " << got.at(step).grad_norm << " vs " << r.grad_norm;
}

TEST(MeshtrainPipelineParity, Pp2Gpipe) { expect_pipeline_parity("pp2-gpipe", 2, {"--pp", "2", "--pp-schedule", "gpipe"}); }
TEST(MeshtrainPipelineParity, Pp2OneFOneB) { expect_pipeline_parity("pp2-1f1b", 2, {"--pp", "2", "--pp-schedule", "1f1b"}); }
TEST(MeshtrainPipelineParity, Pp2Interleaved) {
  expect_pipeline_parity("pp2-interleaved", 2,
                         {"--pp", "2", "--pp-schedule", "interleaved-1f1b", "--pp-virtual-stages", "2"});
}
TEST(MeshtrainPipelineParity, Pp4Gpipe) { expect_pipeline_parity("pp4-gpipe", 4, {"--pp", "4", "--pp-schedule", "gpipe"}); }
TEST(MeshtrainPipelineParity, Pp4OneFOneB) { expect_pipeline_parity("pp4-1f1b", 4, {"--pp", "4", "--pp-schedule", "1f1b"}); }
TEST(MeshtrainPipelineParity, Pp4Interleaved) {
  expect_pipeline_parity("pp4-interleaved", 4,
                         {"--pp", "4", "--pp-schedule", "interleaved-1f1b", "--pp-virtual-stages", "2"});
}
TEST(MeshtrainPipelineParity, Pp2DpShard2) { expect_pipeline_parity("pp2-shard2", 4, {"--pp", "2", "--dp-shard", "2"}); }
TEST(MeshtrainPipelineParity, Pp2Tp2) { expect_pipeline_parity("pp2-tp2", 4, {"--pp", "2", "--tp", "2"}); }
TEST(MeshtrainPipelineParity, Pp2Cp2) { expect_pipeline_parity("pp2-cp2", 4, {"--pp", "2", "--cp", "2"}); }
TEST(MeshtrainPipelineParity, Pp2DpReplicate2DpShard2) {
  expect_pipeline_parity("pp2-rep2-shard2", 8, {"--pp", "2", "--dp-replicate", "2", "--dp-shard", "2"});
}
// FSDP's once-per-step reduce-scatter and recomputed blocks, with two chunks per stage: each
// chunk's units are armed before that chunk's own last backward.
TEST(MeshtrainPipelineParity, Pp2DpShard2InterleavedGradSyncPerStepCheckpointing) {
  expect_pipeline_parity("pp2-shard2-int-step-ckpt", 4,
                         {"--pp", "2", "--dp-shard", "2", "--pp-schedule", "interleaved-1f1b", "--pp-virtual-stages",
                          "2", "--fsdp-grad-sync", "step", "--activation-checkpointing", "full"});
}

// The stages hold different layers: each rank's log names its chunk, and the stage with the
// embedding is not the one with the head.
TEST(MeshtrainPipeline, EachStageHoldsItsOwnLayers) {
  fs::path d = temp_dir("stages");
  auto args = plus(base_args(d, 1, kModel), {"--nproc-per-node", "4", "--pp", "4", "--pp-schedule", "1f1b"});
  ASSERT_EQ(run(args, d), 0) << slurp(d / "stderr.txt");
  const std::string r0 = slurp(d / "rank0.log"), r3 = slurp(d / "rank3.log"), r1 = slurp(d / "rank1.log");
  EXPECT_NE(r0.find("pipeline stage 0 of 4"), std::string::npos) << r0;
  EXPECT_NE(r0.find("layers 0-1 + embedding"), std::string::npos) << r0;
  EXPECT_EQ(r0.find("head"), std::string::npos) << r0;
  EXPECT_NE(r3.find("layers 6-7 + norm and head"), std::string::npos) << r3;
  EXPECT_NE(r1.find("layers 2-3"), std::string::npos) << r1;
  EXPECT_EQ(r1.find("embedding"), std::string::npos) << r1;
}

// Evaluation runs forwards through the stages: the same held-out loss as one process.
TEST(MeshtrainPipeline, EvaluationThroughTheStagesEqualsOneProcess) {
  const std::string eval = std::string(MESHWORK_RESOURCE_DIR) + "/data/kjv.bin";
  const std::vector<std::string> eval_args = {"--eval-data", eval, "--eval-batches", "2"};
  fs::path one = temp_dir("eval-one");
  ASSERT_EQ(run(plus(base_args(one, 2, kModel), eval_args), one), 0) << slurp(one / "stderr.txt");
  fs::path staged = temp_dir("eval-pp");
  ASSERT_EQ(run(plus(plus(base_args(staged, 2, kModel), eval_args),
                     {"--nproc-per-node", "4", "--pp", "2", "--dp-shard", "2", "--pp-schedule", "interleaved-1f1b",
                      "--pp-virtual-stages", "2"}),
                staged),
            0)
      << slurp(staged / "stderr.txt");
  const auto a = evals_of(one / "metrics-rank0.jsonl"), b = evals_of(staged / "metrics-rank0.jsonl");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].tokens, b[0].tokens);
  EXPECT_LT(std::abs(a[0].loss - b[0].loss) / a[0].loss, 1e-4) << a[0].loss << " vs " << b[0].loss;
}

TEST(MeshtrainPipeline, ResumeEqualsUninterruptedRun) {
  const int steps = 8;
  const std::vector<std::string> shape = {"--nproc-per-node", "2", "--pp", "2"};
  fs::path a = temp_dir("pp-uninterrupted");
  ASSERT_EQ(run(plus(base_args(a, steps, kModel), shape), a), 0) << slurp(a / "stderr.txt");
  const auto full = steps_of(a / "metrics-rank0.jsonl");
  // Stopped once the checkpoint of step 4 is complete (every stage rank saves its own units).
  fs::path b = temp_dir("pp-interrupted");
  Proc p = start(plus(plus(base_args(b, steps, kModel), shape), {"--checkpoint-every", "4"}), b);
  const fs::path done4 = b / "checkpoints" / "step-00000004" / "COMPLETE";
  for (int i = 0; i < 600 && !fs::exists(done4); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(p.pid, SIGTERM);
  wait_exit(p);
  ASSERT_TRUE(fs::exists(done4)) << slurp(b / "stderr.txt");
  fs::remove_all(b / "checkpoints" / "step-00000008");  // resume must start at 4
  fs::path r = temp_dir("pp-resumed");
  ASSERT_EQ(run(plus(plus(base_args(r, steps, kModel), shape),
                     {"--resume", "--checkpoint-dir", (b / "checkpoints").string()}),
                r),
            0)
      << slurp(r / "stderr.txt") << slurp(r / "rank0.log");
  const auto resumed = steps_of(r / "metrics-rank0.jsonl");
  ASSERT_EQ(resumed.size(), 4u);
  ASSERT_EQ(resumed.begin()->first, 4);
  for (const auto& [step, rec] : resumed) {
    EXPECT_EQ(rec.loss, full.at(step).loss) << "step " << step;
    EXPECT_EQ(rec.grad_norm, full.at(step).grad_norm) << "step " << step;
  }
  // The same checkpoint at another cut (two chunks per stage): resharded, the same losses.
  fs::path other = temp_dir("pp-resumed-other-cut");
  ASSERT_EQ(run(plus(plus(base_args(other, steps, kModel), shape),
                     {"--resume", "--checkpoint-dir", (b / "checkpoints").string(), "--pp-schedule",
                      "interleaved-1f1b", "--pp-virtual-stages", "2"}),
                other),
            0)
      << slurp(other / "stderr.txt") << slurp(other / "rank0.log");
  EXPECT_NE(slurp(other / "rank0.log").find("resharded: "), std::string::npos);
  const auto recut = steps_of(other / "metrics-rank0.jsonl");
  ASSERT_EQ(recut.size(), 4u);
  for (const auto& [step, rec] : recut)
    EXPECT_LT(std::abs(rec.loss - full.at(step).loss) / full.at(step).loss, 1e-4) << "step " << step;
}

// A stage rank killed mid-run: its neighbours' receives fail, the supervisor stops every rank
// and names the one that died, within seconds.
TEST(MeshtrainPipeline, KilledStageStopsThePipeline) {
  fs::path d = temp_dir("pp-kill");
  Proc p = start(plus(base_args(d, 100000, kModel), {"--nproc-per-node", "4", "--pp", "4"}), d);
  const fs::path m2 = d / "metrics-rank2.jsonl";
  for (int i = 0; i < 600 && steps_of(m2).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(steps_of(m2).empty()) << slurp(d / "rank2.log");
  const auto t0 = std::chrono::steady_clock::now();
  kill(std::stoi(slurp(d / "rank2.pid")), SIGKILL);
  const int code = wait_exit(p);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(code, 0);
  EXPECT_LT(took, 10.0);
  const std::string err = slurp(d / "stderr.txt");
  EXPECT_NE(err.find("rank 2"), std::string::npos) << err;
  for (int r = 0; r < 4; ++r) {
    const pid_t pid = std::stoi(slurp(d / ("rank" + std::to_string(r) + ".pid")));
    EXPECT_NE(kill(pid, 0), 0) << "rank " << r << " still runs";
  }
}

TEST(MeshtrainPipeline, RefusesWhatStagesCannotDoYet) {
  fs::path d = temp_dir("pp-save-hf");
  EXPECT_EQ(run(plus(base_args(d, 1, kModel), {"--nproc-per-node", "2", "--pp", "2", "--save-hf", (d / "hf").string()}), d),
            2);
  EXPECT_NE(slurp(d / "stderr.txt").find("--save-hf: pp 2"), std::string::npos) << slurp(d / "stderr.txt");
  // More stages than layers: core's rule, with the numbers.
  fs::path e = temp_dir("pp-too-many");
  EXPECT_EQ(run(plus(base_args(e, 1), {"--nproc-per-node", "4", "--pp", "4"}), e), 2);
  EXPECT_NE(slurp(e / "stderr.txt").find("num_hidden_layers (2)"), std::string::npos) << slurp(e / "stderr.txt");
}

}  // namespace
