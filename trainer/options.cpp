#include "trainer/options.h"

#include "core/run_config_flags.h"

#include <charconv>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
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

// This process's own flags; the run config's flags (--model, --steps, --tp, ...) are core's
// table (core/run_config_flags.h), shared with `meshwork launch`.
const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--config", "FILE", "the run config (JSON, core/run_config.h) to run; the run config flags set its fields on top",
       [](TrainerOptions&, const std::string& v) -> Status {
         if (v.empty()) return Error{"--config", v, "a path to a run config JSON file"};
         return {};  // read before every other flag (parse_options)
       }},
      {"--check", "", "validate the run against the placement (--nproc-per-node, --nnodes) and exit",
       [](TrainerOptions& o, const std::string&) -> Status {
         o.check_only = true;
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
      {"--resume", "", "continue from the latest complete checkpoint in the checkpoint directory",
       [](TrainerOptions& o, const std::string&) -> Status {
         o.resume = true;
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

namespace {
// The value of --config, if given (the last one wins, as for every flag).
std::optional<std::string> config_flag(const std::vector<std::string>& args) {
  std::optional<std::string> path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) path = args[++i];
    else if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
  }
  return path;
}
}  // namespace

Result<TrainerOptions> parse_options(const std::vector<std::string>& args) {
  TrainerOptions o;
  if (auto path = config_flag(args); path && !path->empty()) {
    auto run = load_run_config(*path);
    if (!run.ok()) {
      Error e = run.error();
      // Name the file as well as the field: "--config: run.json: training.lr: ...".
      return Error{"--config", *path, e.message(), e.kind};
    }
    o.run = *run;
    o.config_path = *path;
  }
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
    if (const RunConfigFlag* rf = find_run_config_flag(a)) {
      if (!has_value) {
        if (i + 1 >= args.size()) return Error{a, "", "needs a value: " + rf->arg};
        value = args[++i];
      }
      if (Status s = rf->apply(o.run, value); !s.ok()) return s.error();
      continue;
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
  return o;
}

std::string usage() {
  std::ostringstream out;
  out << "usage: meshtrain [flags]\n"
         "Trains a Llama-style decoder on one or more ranks (dp_replicate x dp_shard x cp x tp).\n"
         "Launch: torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
         "MASTER_ADDR, MASTER_PORT), or --nproc-per-node N [--nnodes --node-rank --master-addr\n"
         "--master-port] to spawn and supervise the ranks of this node.\n"
         "Exit codes: 0 ok, 2 invalid input, 3 the run failed (names the rank), 1 other.\n";
  auto line = [&](const std::string& name, const std::string& arg, const std::string& help) {
    std::string left = "  " + name + (arg.empty() ? "" : " " + arg);
    if (left.size() < 34) left.resize(34, ' ');
    else left += "\n" + std::string(34, ' ');
    out << left << help << "\n";
  };
  out << "\nrun config flags (set the fields of --config's run config, or of the defaults):\n";
  for (const auto& f : run_config_flags()) line(f.name, f.arg, f.help);
  out << "\nprocess flags:\n";
  for (const auto& f : flags()) line(f.name, f.arg, f.help);
  out << "  --help                          this text\n";
  return out.str();
}

std::vector<std::string> to_args(const TrainerOptions& o) {
  std::vector<std::string> a;
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
