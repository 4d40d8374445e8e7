#include "core/run_config_flags.h"

#include <cstdint>
#include <limits>
#include <sstream>

#include "core/cli_args.h"

namespace meshwork {

namespace {

// The file reader's bound (the fields are int, core/run_config.cpp's read_int): a flag and a
// file accept the same values, so a config always has a flag form (a fuzz find: steps
// 1555505550 was read from a file and its --steps refused).
constexpr int64_t kMaxWhole = std::numeric_limits<int32_t>::max();

Result<int64_t> whole(const std::string& flag, const std::string& v, int64_t min, const std::string& allowed) {
  return parse_integer(flag, v, min, kMaxWhole, allowed);
}

// A flag that sets one int field of training.
RunConfigFlag int_flag(std::string name, std::string arg, std::string help, int TrainingConfig::*field, int min) {
  const std::string allowed = "a whole number >= " + std::to_string(min);
  return {name, std::move(arg), std::move(help), [name, field, min, allowed](RunConfig& c, const std::string& v) -> Status {
            auto r = whole(name, v, min, allowed);
            if (!r.ok()) return r.error();
            c.training.*field = static_cast<int>(*r);
            return {};
          }};
}

// A flag that sets one double field of training (> 0 when strictly positive), at most `max` (the
// file reader's bound for the field, so a flag never makes a config the file refuses).
std::string exact(double d);  // 17 significant digits: reads back to the same double

RunConfigFlag real_flag(std::string name, std::string arg, std::string help, double TrainingConfig::*field,
                        bool positive, double max = 1e9) {
  const std::string allowed = positive ? "a number > 0" : max < 1e9 ? "a number from 0 to " + exact(max) : "a number >= 0";
  return {name, std::move(arg), std::move(help), [name, field, positive, max, allowed](RunConfig& c, const std::string& v) -> Status {
            const double min = positive ? std::numeric_limits<double>::denorm_min() : 0.0;
            auto r = parse_number(name, v, min, max, allowed);
            if (!r.ok()) return r.error();
            c.training.*field = *r;
            return {};
          }};
}

// A flag whose value is one of a few words, read by core's own parser for the field.
template <class T>
RunConfigFlag word_flag(std::string name, std::string arg, std::string help,
                        Result<T> (*parse)(std::string_view, std::string_view), T TrainingConfig::*field) {
  return {name, std::move(arg), std::move(help), [name, parse, field](RunConfig& c, const std::string& v) -> Status {
            auto r = parse(v, name);
            if (!r.ok()) return r.error();
            c.training.*field = *r;
            return {};
          }};
}

RunConfigFlag path_flag(std::string name, std::string arg, std::string help, nlohmann::json RunConfig::*field,
                        std::string allowed) {
  return {name, std::move(arg), std::move(help), [name, field, allowed](RunConfig& c, const std::string& v) -> Status {
            if (v.empty()) return Error{name, v, allowed};
            c.*field = v;
            return {};
          }};
}

const char* axis_help(Axis axis) {
  switch (axis) {
    case Axis::dp_replicate: return "replicas (DDP gradient all-reduce); auto (-1) fills from the world";
    case Axis::dp_shard: return "FSDP shards (ZeRO-3 per decoder block)";
    case Axis::cp: return "context-parallel ranks (ring attention, load-balanced causal chunks)";
    case Axis::tp: return "tensor-parallel ranks (Megatron column/row split, vocabulary-parallel embedding and head)";
    case Axis::pp: return "pipeline stages (decoder layers cut into pp consecutive stages; default 1)";
  }
  return "";
}

std::vector<RunConfigFlag> make_flags() {
  using T = TrainingConfig;
  std::vector<RunConfigFlag> f = {
      {"--model", "NAME|PATH", "model preset (tiny, small, ...), a Hugging Face config.json or model directory (default tiny)",
       [](RunConfig& c, const std::string& v) -> Status {
         if (Status s = check_model_reference("--model", v); !s) return s;
         c.model = v;
         return {};
       }},
      path_flag("--data", "PATH", "llm.c .bin shard or directory of shards (default: the bundled corpus)",
                &RunConfig::data, "a path to a .bin shard or a directory"),
      int_flag("--steps", "N", "optimizer steps (default 100)", &T::steps, 1),
      int_flag("--seq-len", "T", "tokens per sequence (default 256)", &T::seq_len, 1),
      int_flag("--global-batch", "G", "sequences per optimizer step over the whole mesh (default 8)", &T::global_batch, 1),
      int_flag("--micro-batch", "B", "sequences per forward/backward on one data-parallel rank (default 1)",
               &T::micro_batch, 1),
      real_flag("--lr", "X", "peak learning rate of AdamW (default 3e-4)", &T::lr, true, kMaxLearningRate),
      int_flag("--warmup-steps", "N", "linear warmup steps before the cosine decay (default 10)", &T::warmup_steps, 0),
      {"--seed", "S", "seed of the initial weights (default 1234)",
       [](RunConfig& c, const std::string& v) -> Status {
         auto r = parse_integer("--seed", v, 0, std::numeric_limits<int64_t>::max(), "a whole number >= 0");
         if (!r.ok()) return r.error();
         c.training.seed = static_cast<uint64_t>(*r);
         return {};
       }},
  };
  for (Axis axis : kAxes) {
    const std::string name(axis_flag(axis));
    f.push_back({name, "N", axis_help(axis), [name, axis](RunConfig& c, const std::string& v) -> Status {
                   if (v == "auto" || v == "-1") {
                     c.mesh[axis] = -1;
                     return {};
                   }
                   auto r = whole(name, v, 1, "a whole number >= 1, or auto (-1) for one axis");
                   if (!r.ok()) return r.error();
                   c.mesh[axis] = static_cast<int>(*r);
                   return {};
                 }});
  }
  f.push_back({std::string(kEpFlag), "N",
               "expert-parallel ranks (mixture-of-experts models): experts split over ep ranks borrowed from "
               "dp_shard x cp x tp, tokens dispatched by all-to-all; default 1",
               [](RunConfig& c, const std::string& v) -> Status {
                 auto r = whole(std::string(kEpFlag), v, 1, "a whole number >= 1 dividing dp_shard x cp x tp");
                 if (!r.ok()) return r.error();
                 c.mesh.ep = static_cast<int>(*r);
                 return {};
               }});
  f.push_back(word_flag("--pp-schedule", "gpipe|1f1b|interleaved-1f1b",
                        "with pp > 1: the order micro-batches run through the stages (default 1f1b)",
                        parse_pipeline_schedule, &T::pp_schedule));
  f.push_back(int_flag("--pp-virtual-stages", "V",
                       "with --pp-schedule interleaved-1f1b: chunks of layers per rank (>= 2; default 1)",
                       &T::pp_virtual_stages, 1));
  f.push_back({"--sequence-parallel", "on|off", "with tp > 1: norms and residuals on sequence shards (default on)",
               [](RunConfig& c, const std::string& v) -> Status {
                 if (v != "on" && v != "off") return Error{"--sequence-parallel", v, "on or off"};
                 c.training.sequence_parallel = v == "on";
                 return {};
               }});
  f.push_back(word_flag("--fsdp-grad-sync", "micro-batch|step",
                        "FSDP with gradient accumulation: reduce-scatter every micro-batch (default; shard-sized "
                        "gradients) or once per step (less traffic; holds every unit's unsharded fp32 gradient "
                        "between micro-batches)",
                        parse_fsdp_grad_sync, &T::fsdp_grad_sync));
  f.push_back(word_flag("--precision", "fp32|bf16", "compute precision (fp32 master weights either way)",
                        parse_precision, &T::precision));
  f.push_back(word_flag("--activation-checkpointing", "none|full", "recompute every decoder block in backward",
                        parse_activation_checkpointing, &T::activation_checkpointing));
  f.push_back(word_flag("--init", "auto|hf|random",
                        "initial weights: the model directory's Hugging Face checkpoint (hf) or the seed (random); "
                        "default auto: hf when --model is a directory holding weights",
                        parse_weight_init, &T::init));
  f.push_back(word_flag("--device", "cpu|cuda", "cpu (Gloo) or cuda (NCCL, one GPU per local rank)", parse_device,
                        &T::device));
  f.push_back(int_flag("--checkpoint-every", "K", "save a checkpoint every K steps (default 0: never)",
                       &T::checkpoint_every, 0));
  f.push_back(int_flag("--collective-timeout", "SECONDS",
                       "meshtrain's watchdog: a rank waiting in one collective this long names the ranks that never "
                       "entered it and stops the run (default 240, before Gloo's 5 minutes)",
                       &T::collective_timeout, 1));
  f.push_back(real_flag("--peak-tflops", "X", "peak TFLOP/s of one rank for MFU (default: measured matmul at start)",
                        &T::peak_tflops, true));
  f.push_back(path_flag("--eval-data", "PATH", "held-out .bin shard or directory: validation loss in the metrics",
                        &RunConfig::eval_data, "a path to a .bin shard or a directory"));
  f.push_back(int_flag("--eval-every", "K", "with --eval-data: evaluate every K steps and at the end (default 0: at the end)",
                       &T::eval_every, 0));
  f.push_back(int_flag("--eval-batches", "N",
                       "with --eval-data: global batches of held-out sequences per evaluation (default 0: all of them)",
                       &T::eval_batches, 0));
  f.push_back({"--save-hf", "DIR", "at the end of the run, export the weights as a Hugging Face directory",
               [](RunConfig& c, const std::string& v) -> Status {
                 if (v.empty()) return Error{"--save-hf", v, "a directory path"};
                 c.save_hf = v;
                 return {};
               }});
  f.push_back(real_flag("--max-grad-norm", "X", "clip gradients to this global L2 norm (default 1.0; 0: off)",
                        &T::max_grad_norm, false));
  f.push_back(real_flag("--weight-decay", "X", "AdamW's decoupled weight decay, 0 to 1 (default 0.1; 0: off)",
                        &T::weight_decay, false, kMaxWeightDecay));
  return f;
}

std::string exact(double d) {
  std::ostringstream s;
  s.precision(17);
  s << d;
  return s.str();
}

}  // namespace

const std::vector<RunConfigFlag>& run_config_flags() {
  static const std::vector<RunConfigFlag> flags = make_flags();
  return flags;
}

const RunConfigFlag* find_run_config_flag(std::string_view name) {
  for (const RunConfigFlag& f : run_config_flags())
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> run_config_to_flags(const RunConfig& c) {
  const TrainingConfig& t = c.training;
  std::vector<std::string> a;
  auto add = [&](const char* flag, std::string value) {
    a.push_back(flag);
    a.push_back(std::move(value));
  };
  if (c.model.is_string()) add("--model", c.model.get<std::string>());
  if (c.data.is_string()) add("--data", c.data.get<std::string>());
  add("--steps", std::to_string(t.steps));
  add("--seq-len", std::to_string(t.seq_len));
  add("--global-batch", std::to_string(t.global_batch));
  add("--micro-batch", std::to_string(t.micro_batch));
  add("--lr", exact(t.lr));
  add("--warmup-steps", std::to_string(t.warmup_steps));
  add("--seed", std::to_string(t.seed));
  for (Axis axis : kAxes) {
    if (axis == Axis::pp && c.mesh[axis] == 1) continue;  // a run without stages: as before pp
    a.emplace_back(axis_flag(axis));
    a.push_back(std::to_string(c.mesh[axis]));
  }
  if (c.mesh.ep != 1) add(kEpFlag.data(), std::to_string(c.mesh.ep));
  if (t.pp_schedule != PipelineSchedule::one_f_one_b) add("--pp-schedule", std::string(to_string(t.pp_schedule)));
  if (t.pp_virtual_stages != 1) add("--pp-virtual-stages", std::to_string(t.pp_virtual_stages));
  add("--sequence-parallel", t.sequence_parallel ? "on" : "off");
  add("--fsdp-grad-sync", std::string(to_string(t.fsdp_grad_sync)));
  add("--precision", std::string(to_string(t.precision)));
  add("--activation-checkpointing", std::string(to_string(t.activation_checkpointing)));
  add("--device", std::string(to_string(t.device)));
  add("--init", std::string(to_string(t.init)));
  add("--checkpoint-every", std::to_string(t.checkpoint_every));
  if (t.peak_tflops > 0) add("--peak-tflops", exact(t.peak_tflops));
  if (t.collective_timeout != TrainingConfig{}.collective_timeout)
    add("--collective-timeout", std::to_string(t.collective_timeout));
  add("--max-grad-norm", exact(t.max_grad_norm));
  add("--weight-decay", exact(t.weight_decay));
  if (c.eval_data.is_string()) add("--eval-data", c.eval_data.get<std::string>());
  add("--eval-every", std::to_string(t.eval_every));
  add("--eval-batches", std::to_string(t.eval_batches));
  if (!c.save_hf.empty()) add("--save-hf", c.save_hf);
  return a;
}

}  // namespace meshwork
