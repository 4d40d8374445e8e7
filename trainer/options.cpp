#include "trainer/options.h"

#include "trainer/free_port.h"

#include <cstdlib>
#include <functional>
#include <limits>
#include <sstream>

#include "core/cli_args.h"
#include "core/run_config_flags.h"

namespace meshwork::trainer {
namespace {

// One row per process flag: what parse_args() knows of it, and how to apply a value.
struct Flag {
  FlagSpec spec;
  std::function<Status(TrainerOptions&, const std::string&)> apply;
};

Status set_int(int& field, const std::string& flag, const std::string& v, int64_t min, int64_t max,
               const std::string& allowed) {
  auto r = parse_integer(flag, v, min, max, allowed);
  if (!r.ok()) return r.error();
  field = static_cast<int>(*r);
  return {};
}

// A flag that sets one string field, refusing an empty value.
Flag text_flag(std::string name, std::string arg, std::string help, std::string TrainerOptions::*field,
               std::string allowed) {
  return {{name, std::move(arg), std::move(help)},
          [name, field, allowed](TrainerOptions& o, const std::string& v) -> Status {
            if (v.empty()) return Error{name, v, allowed};
            o.*field = v;
            return {};
          }};
}

// A flag that sets one int field to a whole number in [min, max].
Flag int_flag(std::string name, std::string arg, std::string help, int TrainerOptions::*field, int64_t min,
              int64_t max, std::string allowed) {
  return {{name, std::move(arg), std::move(help)},
          [name, field, min, max, allowed](TrainerOptions& o, const std::string& v) {
            return set_int(o.*field, name, v, min, max, allowed);
          }};
}

Flag switch_flag(std::string name, std::string help, bool TrainerOptions::*field) {
  return {{name, "", std::move(help)}, [field](TrainerOptions& o, const std::string&) -> Status {
            o.*field = true;
            return {};
          }};
}

constexpr int64_t kMaxCount = 1'000'000'000;

// This process's own flags; the run config's flags (--model, --steps, --tp, ...) are core's
// table (core/run_config_flags.h), shared with `meshwork launch`.
const std::vector<Flag>& flags() {
  using O = TrainerOptions;
  static const std::vector<Flag> table = {
      {{"--config", "FILE", "the run config (JSON, core/run_config.h) to run; the run config flags set its fields on top"},
       [](TrainerOptions&, const std::string& v) -> Status {
         if (v.empty()) return Error{"--config", v, "a path to a run config JSON file"};
         return {};  // read before every other flag (parse_options)
       }},
      switch_flag("--check", "validate the run against the placement (--nproc-per-node, --nnodes) and exit",
                  &O::check_only),
      text_flag("--metrics", "PATH", "write every rank's metrics lines to this one file (default: rank 0's stdout)",
                &O::metrics, "a file path"),
      text_flag("--run-dir", "DIR", "per-rank logs, metrics and pid files (default ./meshtrain-run)", &O::run_dir,
                "a directory path"),
      text_flag("--checkpoint-dir", "DIR", "sharded checkpoints (default RUN_DIR/checkpoints)", &O::checkpoint_dir,
                "a directory path"),
      switch_flag("--resume", "continue from the latest complete checkpoint in the checkpoint directory", &O::resume),
      switch_flag("--no-flight-recorder",
                  "no flight record (RUN_DIR/flight-rank<r>.bin) and no watchdog: only to measure their cost",
                  &O::no_flight_recorder),
      switch_flag("--bench-flight-odd-steps",
                  "the flight recorder marks odd steps only, even steps run without it: only to measure its cost "
                  "within one run (bench/flight_bench.sh)",
                  &O::bench_flight_odd_steps),
      int_flag("--nproc-per-node", "N", "ranks on this node; without RANK in the environment, spawn and supervise them",
               &O::nproc_per_node, 1, kMaxCount, "a whole number >= 1"),
      int_flag("--nnodes", "N", "nodes (default 1)", &O::nnodes, 1, kMaxCount, "a whole number >= 1"),
      int_flag("--node-rank", "I", "this node's index, 0 .. nnodes-1 (default 0)", &O::node_rank, 0, kMaxCount,
               "a whole number >= 0"),
      text_flag("--master-addr", "HOST", "address of node 0, where the TCPStore runs (default 127.0.0.1)",
                &O::master_addr, "a host name or address"),
      int_flag("--master-port", "PORT",
               "TCPStore port on node 0 (default: a free port when --nnodes is 1, as torchrun --standalone; else 29500)",
               &O::master_port, 1, 65535,
               "a port number >= 1"),
  };
  return table;
}

// Every flag meshtrain takes: the run config's, then its own.
const std::vector<FlagSpec>& all_flags() {
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> out;
    for (const RunConfigFlag& f : run_config_flags()) out.push_back({f.name, f.arg, f.help});
    for (const Flag& f : flags()) out.push_back(f.spec);
    return out;
  }();
  return specs;
}

const Flag* find_flag(std::string_view name) {
  for (const Flag& f : flags())
    if (f.spec.name == name) return &f;
  return nullptr;
}

}  // namespace

Result<TrainerOptions> parse_options(const std::vector<std::string>& args) {
  auto parsed = parse_args(args, all_flags(), "meshtrain");
  if (!parsed.ok()) return parsed.error();
  if (!parsed->positional.empty())
    return Error{"argument", parsed->positional[0], "meshtrain takes flags only (see --help)"};
  TrainerOptions o;
  o.help = parsed->help;
  if (auto path = parsed->value("--config"); path && !path->empty()) {
    auto run = load_run_config(*path);
    if (!run.ok()) {
      Error e = run.error();
      // Name the file as well as the field: "--config: run.json: training.lr: ...".
      return Error{"--config", *path, e.message(), e.kind};
    }
    o.run = *run;
    o.config_path = *path;
  }
  // In command-line order, each flag to its table: the run config's sets o.run on top of --config.
  for (const auto& [name, value] : parsed->given) {
    const RunConfigFlag* rf = find_run_config_flag(name);
    if (Status s = rf ? rf->apply(o.run, value) : find_flag(name)->apply(o, value); !s.ok()) return s.error();
  }
  if (o.node_rank >= o.nnodes)
    return Error{"--node-rank", std::to_string(o.node_rank),
                 "0 .. nnodes-1 (nnodes is " + std::to_string(o.nnodes) + ")"};
  return o;
}

std::string usage() {
  std::ostringstream out;
  out << "usage: meshtrain [flags]\n"
         "       meshtrain calibrate [flags]   time matmuls and collectives on the run's ranks\n"
         "                                     (calibration records, docs/metrics.md)\n"
         "Trains a Llama-style decoder on one or more ranks (dp_replicate x dp_shard x cp x tp).\n"
         "Launch: torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
         "MASTER_ADDR, MASTER_PORT), or --nproc-per-node N [--nnodes --node-rank --master-addr\n"
         "--master-port] to spawn and supervise the ranks of this node.\n"
         "Exit codes: 0 ok, 2 invalid input, 3 the run failed (names the rank), 1 other.\n"
         "`meshtrain export --checkpoint DIR --out HF_DIR [--max-shard-size 5GB] [--dtype fp32|bf16]\n"
         "[--force]` writes a checkpoint (any mesh shape) as a Hugging Face model directory.\n";
  const std::vector<FlagSpec>& all = all_flags();  // the run config's, then this process's
  const auto own = all.end() - static_cast<std::ptrdiff_t>(flags().size());
  out << "\nrun config flags (set the fields of --config's run config, or of the defaults):\n"
      << flags_help({all.begin(), own});
  out << "\nprocess flags:\n" << flags_help({own, all.end()}) << flags_help({{"--help", "", "this text"}, {"--version", "", "version, commit and torch version"}});
  return out.str();
}

std::vector<std::string> to_args(const TrainerOptions& o) {
  std::vector<std::string> a;
  if (o.calibrate) a.push_back("calibrate");  // the subcommand first, as main() reads it
  auto add = [&](const std::string& f, const std::string& v) {
    a.push_back(f);
    a.push_back(v);
  };
  if (!o.config_path.empty()) add("--config", o.config_path);
  for (std::string& f : run_config_to_flags(o.run)) a.push_back(std::move(f));
  if (!o.metrics.empty()) add("--metrics", o.metrics);
  add("--run-dir", o.run_dir);
  if (!o.checkpoint_dir.empty()) add("--checkpoint-dir", o.checkpoint_dir);
  if (o.resume) a.push_back("--resume");
  if (o.no_flight_recorder) a.push_back("--no-flight-recorder");
  if (o.bench_flight_odd_steps) a.push_back("--bench-flight-odd-steps");
  return a;
}

Result<LaunchEnv> launch_env(const TrainerOptions& o) {
  LaunchEnv e;
  auto env_int = [](const char* name, int fallback) -> Result<int> {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    auto r = parse_integer(name, v, 0, std::numeric_limits<int>::max(), "a whole number >= 0");
    if (!r.ok()) return r.error();
    return static_cast<int>(*r);
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

int resolve_master_port(const TrainerOptions& o) {
  if (o.master_port > 0) return o.master_port;
  const char* rank = std::getenv("RANK");
  const bool torchrun_env = rank && *rank;
  if (o.nnodes == 1 && !torchrun_env)
    if (int port = free_tcp_port(); port > 0) return port;
  return 29500;
}

}  // namespace meshwork::trainer
