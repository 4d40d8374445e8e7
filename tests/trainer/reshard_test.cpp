// A checkpoint saved at one mesh shape resumes at another (trainer/reshard.h), with the real
// meshtrain binary: real processes, real Gloo over loopback, the bundled corpus. Each case trains
// 12 steps at shape A with a checkpoint at step 6, then resumes that checkpoint at shape B (other
// axes, another world size): steps 7-12 (6..11 counted from 0) equal the uninterrupted 1-process
// 12-step run within 1e-4, so parameters, both AdamW moments, the step and the data position
// were carried. What a resume cost (peak resident growth) is recorded per rank.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/metrics.h"
#include "tests/trainer/meshtrain_runs.h"

using namespace meshwork;
using namespace meshwork::test;

namespace {

constexpr int kSteps = 12, kCheckpointAt = 6;

struct ReshardCase {
  std::string name;
  int from_nproc;
  std::vector<std::string> from;
  int to_nproc;
  std::vector<std::string> to;
};

// gtest names a case by its name, not its bytes.
void PrintTo(const ReshardCase& c, std::ostream* os) { *os << c.name; }

std::vector<std::string> shape_args(int nproc, const std::vector<std::string>& shape) {
  return plus({"--nproc-per-node", std::to_string(nproc)}, shape);
}

class MeshtrainReshard : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(MeshtrainReshard, ResumedStepsEqualTheUninterruptedOneProcessRun) {
  const ReshardCase& c = GetParam();
  const auto& ref = reference_run("tiny", kSteps);
  ASSERT_EQ(ref.size(), static_cast<size_t>(kSteps));

  // Shape A: the whole run, so that step 6's checkpoint is what any run of it leaves (the
  // schedule's length is 12 either way); the later checkpoint is dropped.
  const fs::path a = temp_dir(c.name + "-a");
  ASSERT_EQ(run(plus(plus(base_args(a, kSteps), shape_args(c.from_nproc, c.from)),
                     {"--checkpoint-every", std::to_string(kCheckpointAt)}),
                a),
            0)
      << slurp(a / "stderr.txt") << slurp(a / "rank0.log");
  fs::remove_all(a / "checkpoints" / "step-00000012");
  const fs::path saved = a / "checkpoints" / "step-00000006";
  ASSERT_TRUE(fs::exists(saved / "COMPLETE"));
  // The slice files were merged into meta.json, which carries the step and the data position.
  const auto meta = nlohmann::json::parse(slurp(saved / "meta.json"));
  EXPECT_EQ(meta.at("step"), kCheckpointAt);
  EXPECT_EQ(meta.at("data_position"), kCheckpointAt * 8);  // global batch 8
  EXPECT_TRUE(meta.at("tensors").contains("layers.1.wq")) << meta.dump();
  EXPECT_FALSE(fs::exists(saved / "rank0.slices.json"));

  // Shape B from that checkpoint.
  const fs::path b = temp_dir(c.name + "-b");
  ASSERT_EQ(run(plus(plus(base_args(b, kSteps), shape_args(c.to_nproc, c.to)),
                     {"--resume", "--checkpoint-dir", (a / "checkpoints").string()}),
                b),
            0)
      << slurp(b / "stderr.txt") << slurp(b / "rank0.log");
  const std::string log = slurp(b / "rank0.log");
  EXPECT_NE(log.find("resharded: saved at mesh"), std::string::npos) << log;
  const auto resumed = steps_of(b / "metrics-rank0.jsonl");
  ASSERT_EQ(resumed.size(), static_cast<size_t>(kSteps - kCheckpointAt));
  ASSERT_EQ(resumed.begin()->first, kCheckpointAt);
  for (const auto& [step, rec] : resumed) {
    const double want = ref.at(step).loss;
    EXPECT_LT(std::abs(rec.loss - want) / std::abs(want), 1e-4)
        << c.name << " step " << step << ": " << rec.loss << " vs " << want;
  }
  // Every rank resharded and said what it cost.
  for (int r = 0; r < c.to_nproc; ++r) {
    const auto cost = nlohmann::json::parse(slurp(b / ("resume-rank" + std::to_string(r) + ".json")));
    EXPECT_TRUE(cost.at("resharded").get<bool>());
    EXPECT_GT(cost.at("state_bytes").get<int64_t>(), 0);
    RecordProperty("rank" + std::to_string(r) + "_peak_rss_growth_bytes",
                   std::to_string(cost.at("peak_rss_growth_bytes").get<int64_t>()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MeshtrainReshard,
    ::testing::Values(
        ReshardCase{"shard4_to_shard2", 4, {"--dp-shard", "4"}, 2, {"--dp-shard", "2"}},
        ReshardCase{"shard2tp2_to_tp2", 4, {"--dp-shard", "2", "--tp", "2"}, 2, {"--tp", "2"}},
        ReshardCase{"tp2_to_cp2", 2, {"--tp", "2"}, 2, {"--cp", "2"}},
        ReshardCase{"pp2shard2_to_shard2", 4, {"--pp", "2", "--dp-shard", "2"}, 2, {"--dp-shard", "2"}},
        ReshardCase{"hsdp_to_one", 4, {"--dp-replicate", "2", "--dp-shard", "2"}, 1, {}},
        ReshardCase{"replicate2_to_pp2tp2", 2, {"--dp-replicate", "2"}, 4, {"--pp", "2", "--tp", "2"}}),
    [](const ::testing::TestParamInfo<ReshardCase>& info) { return info.param.name; });

// What cannot be resumed is refused before any step, naming what differs: another global batch
// (the data order and the meaning of a step would change), and, at another shape, a checkpoint
// without the slice index (as meshtrain wrote them before it had one).
TEST(MeshtrainReshard, AnotherGlobalBatchAndAMissingSliceIndexAreRefused) {
  const fs::path a = temp_dir("refused-a");
  ASSERT_EQ(run(plus(plus(base_args(a, 2), shape_args(2, {"--dp-shard", "2"})), {"--checkpoint-every", "2"}), a), 0)
      << slurp(a / "stderr.txt");
  const fs::path ckpt = a / "checkpoints";

  const fs::path batch = temp_dir("refused-batch");
  auto args = plus(base_args(batch, 4), plus(shape_args(2, {"--dp-shard", "2"}), {"--resume", "--checkpoint-dir", ckpt.string()}));
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--global-batch") args[i + 1] = "16";
  EXPECT_NE(run(args, batch), 0);
  std::string said = slurp(batch / "stderr.txt") + slurp(batch / "rank0.log");
  EXPECT_NE(said.find("global_batch"), std::string::npos) << said;
  EXPECT_NE(said.find("saved 8, this run 16"), std::string::npos) << said;
  EXPECT_TRUE(steps_of(batch / "metrics-rank0.jsonl").empty());

  // The checkpoint as an older meshtrain wrote it: no slice index in meta.json.
  const fs::path meta_path = ckpt / "step-00000002" / "meta.json";
  auto meta = nlohmann::json::parse(slurp(meta_path));
  meta.erase("tensors");
  std::ofstream(meta_path) << meta.dump();
  const fs::path old = temp_dir("refused-old");
  EXPECT_NE(run(plus(base_args(old, 4), plus(shape_args(1, {}), {"--resume", "--checkpoint-dir", ckpt.string()})), old), 0);
  said = slurp(old / "stderr.txt") + slurp(old / "rank0.log");
  EXPECT_NE(said.find("\"tensors\""), std::string::npos) << said;
  EXPECT_NE(said.find("resume it at its own shape"), std::string::npos) << said;
  // At its own shape it still resumes (each rank reads its own file).
  const fs::path same = temp_dir("old-same-shape");
  EXPECT_EQ(run(plus(base_args(same, 4), plus(shape_args(2, {"--dp-shard", "2"}), {"--resume", "--checkpoint-dir", ckpt.string()})),
                same),
            0)
      << slurp(same / "stderr.txt") << slurp(same / "rank0.log");
  EXPECT_EQ(steps_of(same / "metrics-rank0.jsonl").size(), 2u);
}

}  // namespace
