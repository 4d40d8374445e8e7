#include "trainer/options.h"

#include <charconv>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

namespace meshwork::trainer {
namespace {

Result<int64_t> parse_int(const std::string& flag, const std::string& v, int64_t min,
                          const std::string& allowed) {
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || out < min) return Error{flag, v, allowed};
  return out;
}

Result<double> parse_double(const std::string& flag, const std::string& v, double min,
                            bool min_exclusive, const std::string& allowed) {
  char* end = nullptr;
  double out = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(out >= min) || (min_exclusive && out == min))
    return Error{flag, v, allowed};
  return out;
}

// One row per flag: name, value placeholder, help, and how to apply a value.
struct Flag {
  std::string name;
  std::string arg;  // empty: a switch
  std::string help;
  std::function<Status(TrainerOptions&, const std::string&)> apply;
};

Status set_int(int& field, const std::string& flag, const std::string& v, int64_t min,
               const std::string& allowed) {
  auto r = parse_int(flag, v, min, allowed);
  if (!r.ok()) return r.error();
  if (*r > 1'000'000'000) return Error{flag, v, allowed + " (at most 1e9)"};
  field = static_cast<int>(*r);
  return {};
}

Status set_axis(TrainerOptions& o, Axis a, const std::string& flag, const std::string& v) {
  if (v == "auto" || v == "-1") {
    o.mesh.set(a, -1);
    return {};
  }
  int size = 0;
  Status s = set_int(size, flag, v, 1, "a whole number >= 1, or auto (-1) for one axis");
  if (s.ok()) o.mesh.set(a, size);
  return s;
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--model", "NAME|PATH", "model preset (tiny, small, ...) or a Hugging Face config.json (default tiny)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v.empty()) return Error{"--model", v, "a preset name or a path to config.json"};
         o.model = v;
         return {};
       }},
      {"--data", "PATH", "llm.c .bin shard or directory of shards (default: the bundled corpus)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v.empty()) return Error{"--data", v, "a path to a .bin shard or a directory"};
         o.data = v;
         return {};
       }},
      {"--steps", "N", "optimizer steps (default 100)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.training.steps, "--steps", v, 1, "a whole number >= 1");
       }},
      {"--seq-len", "T", "tokens per sequence (default 256)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.training.seq_len, "--seq-len", v, 1, "a whole number >= 1");
       }},
      {"--global-batch", "G", "sequences per optimizer step over the whole mesh (default 8)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.training.global_batch, "--global-batch", v, 1, "a whole number >= 1");
       }},
      {"--micro-batch", "B", "sequences per forward/backward on one data-parallel rank (default 1)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.training.micro_batch, "--micro-batch", v, 1, "a whole number >= 1");
       }},
      {"--lr", "X", "peak learning rate of AdamW (default 3e-4)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         auto r = parse_double("--lr", v, 0, true, "a number > 0");
         if (!r.ok()) return r.error();
         o.training.lr = *r;
         return {};
       }},
      {"--warmup-steps", "N", "linear warmup steps before the cosine decay (default 10)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.training.warmup_steps, "--warmup-steps", v, 0, "a whole number >= 0");
       }},
      {"--seed", "S", "seed of the initial weights (default 1234)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         auto r = parse_int("--seed", v, 0, "a whole number >= 0");
         if (!r.ok()) return r.error();
         o.training.seed = static_cast<uint64_t>(*r);
         return {};
       }},
      {"--dp-replicate", "N", "replicas (DDP gradient all-reduce); auto (-1) fills from the world",
       [](TrainerOptions& o, const std::string& v) { return set_axis(o, Axis::dp_replicate, "--dp-replicate", v); }},
      {"--dp-shard", "N", "FSDP shards (ZeRO-3 per decoder block)",
       [](TrainerOptions& o, const std::string& v) { return set_axis(o, Axis::dp_shard, "--dp-shard", v); }},
      {"--cp", "N", "context-parallel ranks (ring attention, load-balanced causal chunks)",
       [](TrainerOptions& o, const std::string& v) { return set_axis(o, Axis::cp, "--cp", v); }},
      {"--tp", "N", "tensor-parallel ranks (Megatron column/row split, vocabulary-parallel embedding and head)",
       [](TrainerOptions& o, const std::string& v) { return set_axis(o, Axis::tp, "--tp", v); }},
      {"--sequence-parallel", "on|off", "with tp > 1: norms and residuals on sequence shards (default on)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v != "on" && v != "off") return Error{"--sequence-parallel", v, "on or off"};
         o.sequence_parallel = v == "on";
         return {};
       }},
      {"--fsdp-grad-sync", "micro-batch|step",
       "FSDP with gradient accumulation: reduce-scatter every micro-batch (default; shard-sized gradients) "
       "or once per step (less traffic; holds every unit's unsharded fp32 gradient between micro-batches)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v != "micro-batch" && v != "step") return Error{"--fsdp-grad-sync", v, "micro-batch or step"};
         o.fsdp_grad_sync_per_step = v == "step";
         return {};
       }},
      {"--precision", "fp32|bf16", "compute precision (fp32 master weights either way)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         auto r = parse_precision(v, "--precision");
         if (!r.ok()) return r.error();
         o.training.precision = *r;
         return {};
       }},
      {"--activation-checkpointing", "none|full", "recompute every decoder block in backward",
       [](TrainerOptions& o, const std::string& v) -> Status {
         auto r = parse_activation_checkpointing(v, "--activation-checkpointing");
         if (!r.ok()) return r.error();
         o.training.activation_checkpointing = *r;
         return {};
       }},
      {"--device", "cpu|cuda", "cpu (Gloo) or cuda (NCCL, one GPU per local rank)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         auto r = parse_device(v, "--device");
         if (!r.ok()) return r.error();
         o.training.device = *r;
         return {};
       }},
      {"--metrics", "PATH", "write every rank's metrics lines to this one file (default: rank 0's stdout)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v.empty()) return Error{"--metrics", v, "a file path"};
         o.metrics = v;
         return {};
       }},
      {"--run-dir", "DIR", "per-rank logs, metrics and pid files (default ./meshtrain-run)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v.empty()) return Error{"--run-dir", v, "a directory path"};
         o.run_dir = v;
         return {};
       }},
      {"--checkpoint-dir", "DIR", "sharded checkpoints (default RUN_DIR/checkpoints)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v.empty()) return Error{"--checkpoint-dir", v, "a directory path"};
         o.checkpoint_dir = v;
         return {};
       }},
      {"--checkpoint-every", "K", "save a checkpoint every K steps (default 0: never)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.training.checkpoint_every, "--checkpoint-every", v, 0, "a whole number >= 0");
       }},
      {"--resume", "", "continue from the latest complete checkpoint in the checkpoint directory",
       [](TrainerOptions& o, const std::string&) -> Status {
         o.resume = true;
         return {};
       }},
      {"--peak-tflops", "X", "peak TFLOP/s of one rank for MFU (default: measured matmul at start)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         auto r = parse_double("--peak-tflops", v, 0, true, "a number > 0");
         if (!r.ok()) return r.error();
         o.peak_tflops = *r;
         return {};
       }},
      {"--max-grad-norm", "X", "clip gradients to this global L2 norm (default 1.0; 0: off)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         auto r = parse_double("--max-grad-norm", v, 0, false, "a number >= 0");
         if (!r.ok()) return r.error();
         o.max_grad_norm = *r;
         return {};
       }},
      {"--nproc-per-node", "N", "ranks on this node; without RANK in the environment, spawn and supervise them",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.nproc_per_node, "--nproc-per-node", v, 1, "a whole number >= 1");
       }},
      {"--nnodes", "N", "nodes (default 1)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.nnodes, "--nnodes", v, 1, "a whole number >= 1");
       }},
      {"--node-rank", "I", "this node's index, 0 .. nnodes-1 (default 0)",
       [](TrainerOptions& o, const std::string& v) {
         return set_int(o.node_rank, "--node-rank", v, 0, "a whole number >= 0");
       }},
      {"--master-addr", "HOST", "address of node 0, where the TCPStore runs (default 127.0.0.1)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         if (v.empty()) return Error{"--master-addr", v, "a host name or address"};
         o.master_addr = v;
         return {};
       }},
      {"--master-port", "PORT", "TCPStore port on node 0 (default 29500)",
       [](TrainerOptions& o, const std::string& v) -> Status {
         Status s = set_int(o.master_port, "--master-port", v, 1, "a port number 1..65535");
         if (s.ok() && o.master_port > 65535) return Error{"--master-port", v, "a port number 1..65535"};
         return s;
       }},
  };
  return table;
}

}  // namespace

Result<TrainerOptions> parse_options(const std::vector<std::string>& args) {
  TrainerOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = nullptr;
    for (const auto& f : flags())
      if (f.name == a) flag = &f;
    if (!flag) return Error{a, "", "not a meshtrain flag (see --help)"};
    if (!flag->arg.empty() && !has_value) {
      if (i + 1 >= args.size()) return Error{a, "", "needs a value: " + flag->arg};
      value = args[++i];
    }
    if (Status s = flag->apply(o, value); !s.ok()) return s.error();
  }
  if (o.node_rank >= o.nnodes)
    return Error{"--node-rank", std::to_string(o.node_rank),
                 "0 .. nnodes-1 (nnodes is " + std::to_string(o.nnodes) + ")"};
  if (o.training.global_batch % o.training.micro_batch != 0)
    return Error{"--global-batch", std::to_string(o.training.global_batch),
                 "a multiple of --micro-batch (" + std::to_string(o.training.micro_batch) + ")"};
  return o;
}

std::string usage() {
  std::ostringstream out;
  out << "usage: meshtrain [flags]\n"
         "Trains a Llama-style decoder on one or more ranks (dp_replicate x dp_shard x cp x tp).\n"
         "Launch: torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
         "MASTER_ADDR, MASTER_PORT), or --nproc-per-node N [--nnodes --node-rank --master-addr\n"
         "--master-port] to spawn and supervise the ranks of this node.\n"
         "Exit codes: 0 ok, 2 invalid input, 3 the run failed (names the rank), 1 other.\n\nflags:\n";
  for (const auto& f : flags()) {
    std::string left = "  " + f.name + (f.arg.empty() ? "" : " " + f.arg);
    if (left.size() < 34) left.resize(34, ' ');
    else left += "\n" + std::string(34, ' ');
    out << left << f.help << "\n";
  }
  out << "  --help                          this text\n";
  return out.str();
}

std::vector<std::string> to_args(const TrainerOptions& o) {
  std::vector<std::string> a;
  auto add = [&](const std::string& f, const std::string& v) {
    a.push_back(f);
    a.push_back(v);
  };
  auto num = [](double d) {
    std::ostringstream s;
    s.precision(17);
    s << d;
    return s.str();
  };
  const TrainingConfig& t = o.training;
  add("--model", o.model);
  if (!o.data.empty()) add("--data", o.data);
  add("--steps", std::to_string(t.steps));
  add("--seq-len", std::to_string(t.seq_len));
  add("--global-batch", std::to_string(t.global_batch));
  add("--micro-batch", std::to_string(t.micro_batch));
  add("--lr", num(t.lr));
  add("--warmup-steps", std::to_string(t.warmup_steps));
  add("--seed", std::to_string(t.seed));
  add("--dp-replicate", std::to_string(o.mesh.dp_replicate));
  add("--dp-shard", std::to_string(o.mesh.dp_shard));
  add("--cp", std::to_string(o.mesh.cp));
  add("--tp", std::to_string(o.mesh.tp));
  add("--sequence-parallel", o.sequence_parallel ? "on" : "off");
  add("--fsdp-grad-sync", o.fsdp_grad_sync_per_step ? "step" : "micro-batch");
  add("--precision", std::string(to_string(t.precision)));
  add("--activation-checkpointing", std::string(to_string(t.activation_checkpointing)));
  add("--device", std::string(to_string(t.device)));
  if (!o.metrics.empty()) add("--metrics", o.metrics);
  add("--run-dir", o.run_dir);
  if (!o.checkpoint_dir.empty()) add("--checkpoint-dir", o.checkpoint_dir);
  add("--checkpoint-every", std::to_string(t.checkpoint_every));
  if (o.resume) a.push_back("--resume");
  if (o.peak_tflops > 0) add("--peak-tflops", num(o.peak_tflops));
  add("--max-grad-norm", num(o.max_grad_norm));
  return a;
}

Result<LaunchEnv> launch_env(const TrainerOptions& o) {
  LaunchEnv e;
  auto env_int = [](const char* name, int fallback) -> Result<int> {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    int out = 0;
    std::string s(v);
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc() || p != s.data() + s.size() || out < 0)
      return Error{name, s, "a whole number >= 0"};
    return out;
  };
  const char* rank = std::getenv("RANK");
  e.from_env = rank && *rank && std::getenv("WORLD_SIZE");
  e.master_addr = o.master_addr;
  e.master_port = o.master_port;
  if (!e.from_env) {
    e.world_size = o.nnodes * std::max(1, o.nproc_per_node);
    e.local_world_size = std::max(1, o.nproc_per_node);
    return e;
  }
  for (auto [name, field, fallback] :
       {std::tuple{"RANK", &e.rank, 0}, std::tuple{"WORLD_SIZE", &e.world_size, 1},
        std::tuple{"LOCAL_RANK", &e.local_rank, 0},
        std::tuple{"LOCAL_WORLD_SIZE", &e.local_world_size, 1},
        std::tuple{"MASTER_PORT", &e.master_port, o.master_port}}) {
    auto r = env_int(name, fallback);
    if (!r.ok()) return r.error();
    *field = *r;
  }
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  if (e.world_size < 1 || e.rank >= e.world_size)
    return Error{"RANK", std::to_string(e.rank),
                 "0 .. WORLD_SIZE-1 (WORLD_SIZE is " + std::to_string(e.world_size) + ")"};
  if (e.local_world_size < 1 || e.local_rank >= e.local_world_size)
    return Error{"LOCAL_RANK", std::to_string(e.local_rank), "0 .. LOCAL_WORLD_SIZE-1"};
  // A meshtrain supervisor, or torchrun's agent (TORCHELASTIC_USE_AGENT_STORE), already serves
  // the TCPStore on MASTER_PORT: rank 0 must connect to it rather than host a second one.
  const char* hosted = std::getenv("MESHWORK_STORE_HOSTED");
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  e.store_hosted = (hosted && std::string(hosted) == "1") || (agent && std::string(agent) == "True");
  return e;
}

}  // namespace meshwork::trainer
