// The one table of run config flags (core/run_config_flags.h) that meshtrain and `meshwork
// launch` share: every flag sets its field, the config written back as flags reads back equal
// (lr 1e-7 included), and a bad value is refused naming the flag, the value and what is allowed.
#include <gtest/gtest.h>

#include "core/run_config_flags.h"

namespace meshwork {
namespace {

Status apply_all(RunConfig& c, const std::vector<std::string>& args) {
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const RunConfigFlag* f = find_run_config_flag(args[i]);
    if (!f) return Error{args[i], "", "not a run config flag"};
    if (Status st = f->apply(c, args[i + 1]); !st) return st;
  }
  return {};
}

TEST(RunConfigFlags, EveryFlagSetsItsField) {
  RunConfig c;
  ASSERT_TRUE(apply_all(c, {"--model", "small", "--data", "/d/shards", "--steps", "7", "--seq-len", "96",
                            "--global-batch", "12", "--micro-batch", "3", "--lr", "1e-7", "--warmup-steps", "0",
                            "--seed", "5", "--dp-replicate", "2", "--dp-shard", "auto", "--cp", "1", "--tp", "2",
                            "--sequence-parallel", "off", "--fsdp-grad-sync", "step", "--precision", "bf16",
                            "--activation-checkpointing", "full", "--device", "cuda", "--checkpoint-every", "4",
                            "--peak-tflops", "12.5", "--max-grad-norm", "0", "--eval-data", "/d/val.bin",
                            "--eval-every", "50", "--eval-batches", "3", "--save-hf", "/out/hf"})
                  .ok());
  EXPECT_EQ(c.eval_data, "/d/val.bin");
  EXPECT_EQ(c.save_hf, "/out/hf");
  EXPECT_EQ(c.training.eval_every, 50);
  EXPECT_EQ(c.training.eval_batches, 3);
  EXPECT_EQ(c.model, "small");
  EXPECT_EQ(c.data, "/d/shards");
  EXPECT_EQ(c.mesh, (MeshShape{2, -1, 1, 2}));
  const TrainingConfig& t = c.training;
  EXPECT_EQ(t.steps, 7);
  EXPECT_EQ(t.seq_len, 96);
  EXPECT_EQ(t.global_batch, 12);
  EXPECT_EQ(t.micro_batch, 3);
  EXPECT_EQ(t.lr, 1e-7);
  EXPECT_EQ(t.warmup_steps, 0);
  EXPECT_EQ(t.seed, 5u);
  EXPECT_FALSE(t.sequence_parallel);
  EXPECT_EQ(t.fsdp_grad_sync, FsdpGradSync::step);
  EXPECT_EQ(t.precision, Precision::bf16);
  EXPECT_EQ(t.activation_checkpointing, ActivationCheckpointing::full);
  EXPECT_EQ(t.device, DeviceKind::cuda);
  EXPECT_EQ(t.checkpoint_every, 4);
  EXPECT_EQ(t.peak_tflops, 12.5);
  EXPECT_EQ(t.max_grad_norm, 0.0);
  // One flag per axis, named from core's axis table.
  for (Axis a : kAxes) EXPECT_NE(find_run_config_flag(axis_flag(a)), nullptr) << axis_name(a);
}

TEST(RunConfigFlags, WrittenBackReadsBackEqual) {
  RunConfig c;
  c.model = "tiny";
  c.mesh = MeshShape{1, 2, 1, 2};
  c.training.lr = 1e-7;  // std::to_string would write 0.000000
  c.training.max_grad_norm = 0.3;
  c.training.weight_decay = 0.01;
  c.training.peak_tflops = 1.0 / 3;
  c.training.fsdp_grad_sync = FsdpGradSync::step;
  c.training.sequence_parallel = false;
  c.training.init = WeightInit::random;
  c.eval_data = "val.bin";
  c.training.eval_every = 10;
  c.training.eval_batches = 2;
  c.save_hf = "out/hf";
  const std::vector<std::string> flags = run_config_to_flags(c);
  RunConfig back;
  ASSERT_TRUE(apply_all(back, flags).ok());
  EXPECT_EQ(to_json(back), to_json(c));
  EXPECT_EQ(back.training.lr, 1e-7);
  EXPECT_EQ(back.training.init, WeightInit::random);
}

TEST(RunConfigFlags, InitReachesTheRunConfigFile) {
  RunConfig c;
  EXPECT_EQ(c.training.init, WeightInit::auto_);
  ASSERT_TRUE(find_run_config_flag("--init")->apply(c, "hf").ok());
  EXPECT_EQ(c.training.init, WeightInit::hf);
  const nlohmann::json j = to_json(c);
  EXPECT_EQ(j["training"]["init"], "hf");
  auto back = run_config_from_json(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->training.init, WeightInit::hf);
  nlohmann::json bad = j;
  bad["training"]["init"] = "zeros";
  auto refused = run_config_from_json(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), "training.init: zeros: must be auto, hf or random");
}

TEST(RunConfigFlags, BadValuesNameTheFlag) {
  for (auto [flag, value, allowed] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--steps", "0", "a whole number >= 1"},
           {"--lr", "-1", "a number > 0"},
           {"--lr", "0", "a number > 0"},
           {"--lr", "11", "a number > 0 (at most 10)"},  // the file's bound: never a config it refuses
           {"--tp", "x", "a whole number >= 1, or auto (-1) for one axis"},
           {"--device", "tpu", "must be cpu or cuda"},
           {"--init", "pretrained", "must be auto, hf or random"},
           {"--fsdp-grad-sync", "sometimes", "must be micro-batch or step"},
           {"--sequence-parallel", "yes", "on or off"},
           {"--model", "", "a preset name or a path to config.json"}}) {
    RunConfig c;
    Status st = find_run_config_flag(flag)->apply(c, value);
    ASSERT_FALSE(st.ok()) << flag << " " << value;
    EXPECT_EQ(st.error().field, flag);
    EXPECT_EQ(st.error().value, value);
    EXPECT_EQ(st.error().allowed, allowed);
    EXPECT_EQ(st.error().kind, ErrorKind::invalid_input);
  }
  EXPECT_EQ(find_run_config_flag("--nproc-per-node"), nullptr);  // a process flag, not the run's
}

}  // namespace
}  // namespace meshwork

namespace meshwork {
TEST(RunConfigFlags, EveryCountAFileAcceptsHasAFlagForm) {
  // A fuzz find (tests/fuzz/regressions/run_config): a file's steps of 1555505550 (the reader
  // takes any int) had a --steps the flag table refused (it stopped at 10^9).
  auto c = run_config_from_json({{"training", {{"steps", 1555505550}, {"checkpoint_every", 2147483647}}}});
  ASSERT_TRUE(c.ok()) << c.error().message();
  RunConfig back;
  const auto flags = run_config_to_flags(*c);
  for (size_t i = 0; i + 1 < flags.size(); i += 2) {
    const RunConfigFlag* flag = find_run_config_flag(flags[i]);
    ASSERT_NE(flag, nullptr) << flags[i];
    Status s = flag->apply(back, flags[i + 1]);
    ASSERT_TRUE(s.ok()) << flags[i] << " " << flags[i + 1] << ": " << s.error().message();
  }
  EXPECT_EQ(back.training.steps, 1555505550);
  EXPECT_EQ(back.training.checkpoint_every, 2147483647);
  // Past int, both refuse.
  EXPECT_FALSE(run_config_from_json({{"training", {{"steps", 2147483648LL}}}}).ok());
  EXPECT_FALSE(find_run_config_flag("--steps")->apply(back, "2147483648").ok());
}
}  // namespace meshwork
