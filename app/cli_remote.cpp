// `meshwork probe | launch | attach | stop`: the remote subcommands (remote/run_control.h).
//
//   meshwork probe HOST... [--json] | --hostfile F [--json]
//   meshwork launch --hostfile F | --hosts H1,H2 | --local  --nproc-per-node N
//                   <meshtrain shape and training flags> [--config FILE] [--db PATH] [--name NAME]
//                   [--detach] [--remote-root DIR] [--master-addr A] [--master-port P] [--meshtrain BIN]
//                   [--max-restarts N]
//   meshwork attach RUN [--db PATH]
//   meshwork stop RUN [--db PATH] [--grace SECONDS]
// SSH options for all four: --ssh-config F, --known-hosts F, --identity F, --accept-new-host-keys.
// Exit codes: 0 ok; 1 nodes unreachable / other errors; 2 invalid input; 3 the run failed.
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "app/commands.h"
#include "core/store/paths.h"
#include "remote/run_control.h"

namespace meshwork::cli {

namespace {

using namespace meshwork::remote;

std::mutex g_out_mu;

int fail(const Error& e, int code) {
  std::lock_guard lock(g_out_mu);
  std::cerr << "meshwork: " << e.message() << "\n";
  return code;
}

// Flags of meshtrain that launch passes through (each takes a value unless listed in kSwitches).
const std::set<std::string> kTrainerFlags = {
    "--model", "--data", "--steps", "--seq-len", "--global-batch", "--micro-batch", "--lr",
    "--warmup-steps", "--seed", "--dp-replicate", "--dp-shard", "--cp", "--tp", "--precision",
    "--activation-checkpointing", "--device", "--checkpoint-dir", "--checkpoint-every",
    "--peak-tflops", "--max-grad-norm"};
const std::set<std::string> kTrainerSwitches = {"--resume"};
const std::set<std::string> kOwnValueFlags = {
    "--ssh-config", "--known-hosts", "--identity", "--hostfile", "--hosts", "--nproc-per-node",
    "--db", "--name", "--config", "--remote-root", "--master-addr", "--master-port", "--meshtrain",
    "--grace", "--max-restarts"};
const std::set<std::string> kOwnSwitches = {"--json", "--local", "--detach", "--accept-new-host-keys",
                                            "--help", "-h"};

struct Parsed {
  std::map<std::string, std::string> values;
  std::set<std::string> switches;
  std::vector<std::string> positional;
  std::vector<std::string> trainer_args;  // in the order given
};

Result<Parsed> parse(const Args& args, bool allow_trainer_flags) {
  Parsed p;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      if (auto eq = a.find('='); eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_inline = true;
      }
    }
    auto take = [&]() -> Result<std::string> {
      if (has_inline) return value;
      if (i + 1 >= args.size()) return Error{a, "", "needs a value"};
      return args[++i];
    };
    if (kOwnSwitches.count(a)) {
      p.switches.insert(a);
    } else if (kOwnValueFlags.count(a)) {
      auto v = take();
      if (!v) return v.error();
      p.values[a] = *v;
    } else if (allow_trainer_flags && kTrainerSwitches.count(a)) {
      p.trainer_args.push_back(a);
    } else if (allow_trainer_flags && kTrainerFlags.count(a)) {
      auto v = take();
      if (!v) return v.error();
      p.values[a] = *v;
      p.trainer_args.push_back(a);
      p.trainer_args.push_back(*v);
    } else if (a.rfind("-", 0) == 0 && a.size() > 1) {
      return Error{a, "", "is not an option of this command (see --help)"};
    } else {
      p.positional.push_back(args[i]);
    }
  }
  return p;
}

std::optional<std::string> read_password(const std::string& host) {
  if (!isatty(STDIN_FILENO)) return std::nullopt;
  std::cerr << host << " password: " << std::flush;
  termios old{};
  tcgetattr(STDIN_FILENO, &old);
  termios quiet = old;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
  tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  std::string pw;
  std::getline(std::cin, pw);
  tcsetattr(STDIN_FILENO, TCSANOW, &old);
  std::cerr << "\n";
  return pw;
}

SshOptions ssh_options(const Parsed& p) {
  SshOptions o;
  if (p.values.count("--ssh-config")) o.ssh_config = p.values.at("--ssh-config");
  if (p.values.count("--known-hosts")) o.known_hosts = p.values.at("--known-hosts");
  if (p.values.count("--identity")) o.identity = p.values.at("--identity");
  if (p.switches.count("--accept-new-host-keys")) {
    // Headless trust on first use: say exactly what was trusted, so it can be checked later.
    o.on_unknown_host_key = [](const std::string& host, const std::string& fp) {
      std::lock_guard lock(g_out_mu);
      std::cerr << "meshwork: added host key of " << host << ": " << fp << "\n";
      return true;
    };
  }
  o.on_password = read_password;
  return o;
}

std::filesystem::path db_path(const Parsed& p) {
  return p.values.count("--db") ? std::filesystem::path(p.values.at("--db")) : store::default_db_path();
}

Result<std::vector<HostEntry>> hosts_of(const Parsed& p, bool positional_hosts) {
  std::vector<HostEntry> hosts;
  if (p.values.count("--hostfile")) {
    auto h = load_hostfile(p.values.at("--hostfile"));
    if (!h) return h.error();
    hosts = *h;
  }
  if (p.values.count("--hosts")) {
    auto h = parse_host_list(p.values.at("--hosts"));
    if (!h) return h.error();
    hosts.insert(hosts.end(), h->begin(), h->end());
  }
  if (p.switches.count("--local")) hosts.push_back(HostEntry{HostSpec{"", "local", 0}, 0});
  if (positional_hosts) {
    for (const std::string& h : p.positional) {
      auto spec = parse_host_spec(h, "HOST");
      if (!spec) return spec.error();
      hosts.push_back(HostEntry{*spec, 0});
    }
  }
  return hosts;
}

std::string gib(int64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024 * 1024) << " GiB";
  return s.str();
}

std::string self_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::atomic<RunFollower*> g_follower{nullptr};
void on_sigint(int) {
  if (auto* f = g_follower.load()) f->detach();
}

// Follows a run to its end; the exit code says how it ended.
int follow(const std::filesystem::path& db, store::RunId id, const LaunchRecord& rec, const SshOptions& ssh) {
  FollowOptions fo;
  fo.on_event = [](const std::string& level, const std::string& text) {
    std::lock_guard lock(g_out_mu);
    std::cerr << "meshwork: " << level << ": " << text << "\n";
  };
  RunFollower follower(db, id, rec, make_connector(rec, ssh), fo);
  g_follower = &follower;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, nullptr);
  auto outcome = follower.run();
  g_follower = nullptr;
  signal(SIGINT, SIG_DFL);
  if (!outcome) return fail(outcome.error(), kExitError);
  std::cout << "run " << id << ": " << outcome->state_name() << "\n";
  switch (outcome->state) {
    case FollowOutcome::State::succeeded: return kExitOk;
    case FollowOutcome::State::detached:
      std::cerr << "meshwork: detached; the run goes on. Follow it again with `meshwork attach " << id
                << "`, stop it with `meshwork stop " << id << "`\n";
      return kExitOk;
    case FollowOutcome::State::failed:
      if (outcome->root_cause) std::cerr << "meshwork: run failed: " << outcome->root_cause->text() << "\n";
      return kExitNoFit;
    case FollowOutcome::State::stopped: return kExitNoFit;
  }
  return kExitError;
}

Result<store::RunId> resolve(const std::filesystem::path& db, const std::string& run) {
  auto s = store::RunStore::open(db);
  if (!s) return s.error();
  return (*s)->resolve_run(run);
}

constexpr const char* kSshHelp =
    "SSH options: --ssh-config FILE  --known-hosts FILE  --identity FILE  --accept-new-host-keys\n"
    "  (hosts: user@host:port or ~/.ssh/config aliases; unknown host keys are refused unless\n"
    "   --accept-new-host-keys, which prints each fingerprint it adds; changed keys always are)\n";

}  // namespace

int probe_main(const Args& args) {
  auto p = parse(args, false);
  if (!p) return fail(p.error(), kExitInvalid);
  if (p->switches.count("--help") || p->switches.count("-h")) {
    std::cout << "usage: meshwork probe HOST... [--json] | --hostfile F [--json]\n" << kSshHelp;
    return kExitOk;
  }
  auto hosts = hosts_of(*p, true);
  if (!hosts) return fail(hosts.error(), kExitInvalid);
  if (hosts->empty()) return fail(Error{"HOST", "", "name at least one host (or --hostfile F, or local)"}, kExitInvalid);
  std::vector<HostSpec> specs;
  for (const auto& h : *hosts) specs.push_back(h.spec);
  const bool json = p->switches.count("--json") > 0;
  auto results = probe_hosts(specs, ssh_options(*p), [&](const ProbeProgress& pr) {
    if (json || pr.stage != "failed") return;
  });
  int code = kExitOk;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results) {
    if (r.error) {
      code = kExitError;
      fail(r.error->error, kExitError);
      out.push_back({{"host", r.spec.to_string()}, {"error", r.error->error.message()},
                     {"failure", std::string(to_string(r.error->kind))}, {"fingerprint", r.error->fingerprint}});
      continue;
    }
    const NodeInfo& n = *r.info;
    out.push_back(to_json(n));
    if (json) continue;
    std::cout << n.host << "  (" << n.hostname << ", " << n.os << ", " << n.arch << ")\n"
              << "  cpus " << n.cpus << ", memory " << gib(n.mem_total_bytes) << " (" << gib(n.mem_available_bytes)
              << " available), address " << n.address << "\n";
    if (n.gpus.empty()) {
      std::cout << "  no GPU: a CPU node (Gloo)\n";
    } else {
      std::cout << "  " << n.gpus.size() << " x " << n.gpus[0].name << ", " << n.gpus[0].memory_total_mib
                << " MiB each, driver " << n.gpus[0].driver_version << ", weakest GPU link " << n.gpu_link << "\n";
    }
    for (const auto& port : n.ib_ports) {
      std::cout << "  " << (port.roce() ? "RoCE " : "IB ") << port.device << "/" << port.port << " " << port.state
                << " " << port.rate_gbps << " Gb/s\n";
    }
    std::cout << "  torch " << (n.torch_version.empty() ? "none" : n.torch_version) << ", libtorch "
              << (n.libtorch.empty() ? "none found" : n.libtorch.front()) << "\n";
    for (const auto& w : n.warnings) std::cout << "  warning: " << w << "\n";
  }
  if (json) std::cout << out.dump(2) << "\n";
  return code;
}

int launch_main(const Args& args) {
  auto p = parse(args, true);
  if (!p) return fail(p.error(), kExitInvalid);
  if (p->switches.count("--help") || p->switches.count("-h")) {
    std::cout << "usage: meshwork launch --hostfile F | --hosts H1,H2 | --local  --nproc-per-node N\n"
                 "         [meshtrain flags: --model --data --steps --seq-len --global-batch --micro-batch --lr\n"
                 "          --warmup-steps --seed --dp-replicate --dp-shard --cp --tp --precision\n"
                 "          --activation-checkpointing --device --checkpoint-dir --checkpoint-every --resume]\n"
                 "         [--config FILE] [--db PATH] [--name NAME] [--detach] [--remote-root DIR]\n"
                 "         [--master-addr A] [--master-port P] [--meshtrain BIN] [--max-restarts N]\n"
                 "Probes the nodes, validates the shape against them, deploys meshtrain into a private run\n"
                 "directory on each, starts one supervisor per node (detached: the run outlives this\n"
                 "command) and streams every rank's metrics into the store until the run ends.\n"
                 "--max-restarts N: when a rank fails, every node starts all its ranks again from the\n"
                 "latest checkpoint (--checkpoint-every K), at most N times; done on the nodes, so it\n"
                 "works with --detach too.\n"
                 "Exit 0: the run succeeded (or started, with --detach); 3: it failed; 2: invalid input.\n"
              << kSshHelp;
    return kExitOk;
  }
  if (!p->positional.empty()) return fail(Error{"launch", p->positional[0], "takes no positional arguments"}, kExitInvalid);
  LaunchRequest req;
  auto hosts = hosts_of(*p, false);
  if (!hosts) return fail(hosts.error(), kExitInvalid);
  req.hosts = *hosts;
  if (req.hosts.empty()) return fail(Error{"--hosts", "", "give --hostfile F, --hosts H1,H2 or --local"}, kExitInvalid);
  auto int_flag = [&](const std::string& f, int& out) -> Status {
    if (!p->values.count(f)) return {};
    try {
      size_t pos = 0;
      out = std::stoi(p->values.at(f), &pos);
      if (pos != p->values.at(f).size()) throw std::invalid_argument("");
    } catch (...) {
      return Error{f, p->values.at(f), "must be a whole number"};
    }
    return {};
  };
  if (auto st = int_flag("--nproc-per-node", req.nproc_per_node); !st) return fail(st.error(), kExitInvalid);
  if (auto st = int_flag("--master-port", req.master_port); !st) return fail(st.error(), kExitInvalid);
  if (auto st = int_flag("--max-restarts", req.max_restarts); !st) return fail(st.error(), kExitInvalid);
  if (req.max_restarts < 0)
    return fail(Error{"--max-restarts", p->values.at("--max-restarts"), "a whole number >= 0"}, kExitInvalid);
  // The run config: --config, then the flags on top (the same names as meshtrain's).
  if (p->values.count("--config")) {
    auto c = load_run_config(p->values.at("--config"));
    if (!c) return fail(c.error(), kExitInvalid);
    req.config = *c;
    // The config's content is passed to meshtrain as flags, so the trainer sees the same run.
    const auto& t = req.config.training;
    std::vector<std::string> from_config = {
        "--dp-replicate", std::to_string(req.config.mesh.dp_replicate), "--dp-shard", std::to_string(req.config.mesh.dp_shard),
        "--cp", std::to_string(req.config.mesh.cp), "--tp", std::to_string(req.config.mesh.tp),
        "--steps", std::to_string(t.steps), "--seq-len", std::to_string(t.seq_len),
        "--global-batch", std::to_string(t.global_batch), "--micro-batch", std::to_string(t.micro_batch),
        "--seed", std::to_string(t.seed), "--precision", std::string(to_string(t.precision)),
        "--device", std::string(to_string(t.device))};
    if (req.config.model.is_string()) {
      from_config.push_back("--model");
      from_config.push_back(req.config.model.get<std::string>());
    }
    req.trainer_args.insert(req.trainer_args.begin(), from_config.begin(), from_config.end());
  }
  nlohmann::json doc = to_json(req.config);
  auto set_int = [&](const char* flag, nlohmann::json& slot) -> Status {
    if (!p->values.count(flag)) return {};
    try {
      size_t pos = 0;
      long long v = std::stoll(p->values.at(flag), &pos);
      if (pos != p->values.at(flag).size()) throw std::invalid_argument("");
      slot = v;
    } catch (...) {
      return Error{flag, p->values.at(flag), "must be a whole number"};
    }
    return {};
  };
  for (auto [flag, axis] : {std::pair{"--dp-replicate", "dp_replicate"}, {"--dp-shard", "dp_shard"}, {"--cp", "cp"}, {"--tp", "tp"}}) {
    if (auto st = set_int(flag, doc["mesh"][axis]); !st) return fail(st.error(), kExitInvalid);
  }
  for (auto [flag, key] : {std::pair{"--steps", "steps"}, {"--seq-len", "seq_len"}, {"--global-batch", "global_batch"},
                           {"--micro-batch", "micro_batch"}, {"--warmup-steps", "warmup_steps"}, {"--seed", "seed"},
                           {"--checkpoint-every", "checkpoint_every"}}) {
    if (auto st = set_int(flag, doc["training"][key]); !st) return fail(st.error(), kExitInvalid);
  }
  for (auto [flag, key] : {std::pair{"--precision", "precision"}, {"--activation-checkpointing", "activation_checkpointing"},
                           {"--device", "device"}}) {
    if (p->values.count(flag)) doc["training"][key] = p->values.at(flag);
  }
  if (p->values.count("--lr")) {
    try {
      doc["training"]["lr"] = std::stod(p->values.at("--lr"));
    } catch (...) {
      return fail(Error{"--lr", p->values.at("--lr"), "must be a number"}, kExitInvalid);
    }
  }
  if (p->values.count("--model")) doc["model"] = p->values.at("--model");
  if (p->values.count("--data")) doc["data"] = p->values.at("--data");
  auto config = run_config_from_json(doc);
  if (!config) return fail(config.error(), kExitInvalid);
  req.config = *config;
  req.name = p->values.count("--name") ? p->values.at("--name") : "run";
  req.trainer_path = p->values.count("--meshtrain") ? p->values.at("--meshtrain") : self_dir() + "/meshtrain";
  if (p->values.count("--remote-root")) req.remote_root = p->values.at("--remote-root");
  if (p->values.count("--master-addr")) req.master_addr = p->values.at("--master-addr");
  req.ssh = ssh_options(*p);
  req.on_step = [](const std::string& s) {
    std::lock_guard lock(g_out_mu);
    std::cerr << "meshwork: " << s << "\n";
  };
  req.on_deploy = [](const DeployProgress& d) {
    if (d.stage == "uploading" && d.bytes_done != d.bytes_total) return;  // one line per file
    std::lock_guard lock(g_out_mu);
    std::cerr << "meshwork: deploy " << d.host << ": " << d.stage << (d.file.empty() ? "" : " " + d.file);
    if (d.stage == "uploading") std::cerr << " (" << d.bytes_total << " bytes)";
    std::cerr << "\n";
  };
  req.trainer_args = p->trainer_args;
  const auto db = db_path(*p);
  auto launched = launch_run(db, req);
  if (auto* e = std::get_if<LaunchError>(&launched)) {
    for (size_t i = 1; i < e->more.size(); ++i) fail(e->more[i], 0);
    return fail(e->error, e->kind == LaunchError::Kind::invalid ? kExitInvalid : kExitError);
  }
  const LaunchedRun& run = std::get<LaunchedRun>(launched);
  std::cout << "run " << run.id << ": started on " << run.record.nodes.size() << " node(s) in "
            << run.record.nodes[0].run_dir << "\n"
            << std::flush;
  if (p->switches.count("--detach")) return kExitOk;
  return follow(db, run.id, run.record, req.ssh);
}

int attach_main(const Args& args) {
  auto p = parse(args, false);
  if (!p) return fail(p.error(), kExitInvalid);
  if (p->switches.count("--help") || p->positional.size() != 1) {
    std::cout << "usage: meshwork attach RUN [--db PATH]\n"
                 "Follows a launched run again (after a closed workbench or a lost link): backfills every\n"
                 "metric the store lacks, then streams until the run ends.\n"
              << kSshHelp;
    return p->switches.count("--help") ? kExitOk : kExitInvalid;
  }
  const auto db = db_path(*p);
  auto id = resolve(db, p->positional[0]);
  if (!id) return fail(id.error(), kExitInvalid);
  auto rec = load_launch_record(db, *id);
  if (!rec) return fail(rec.error(), kExitInvalid);
  return follow(db, *id, *rec, ssh_options(*p));
}

int stop_main(const Args& args) {
  auto p = parse(args, false);
  if (!p) return fail(p.error(), kExitInvalid);
  if (p->switches.count("--help") || p->positional.size() != 1) {
    std::cout << "usage: meshwork stop RUN [--db PATH] [--grace SECONDS]\n"
                 "SIGTERM to every rank's process group on every node, SIGKILL after the grace period\n"
                 "(default 5 s).\n"
              << kSshHelp;
    return p->switches.count("--help") ? kExitOk : kExitInvalid;
  }
  const auto db = db_path(*p);
  auto id = resolve(db, p->positional[0]);
  if (!id) return fail(id.error(), kExitInvalid);
  auto rec = load_launch_record(db, *id);
  if (!rec) return fail(rec.error(), kExitInvalid);
  int grace = 5;
  if (p->values.count("--grace")) {
    try {
      grace = std::stoi(p->values.at("--grace"));
    } catch (...) {
      return fail(Error{"--grace", p->values.at("--grace"), "must be a whole number of seconds"}, kExitInvalid);
    }
  }
  if (auto st = stop_all(*rec, ssh_options(*p), std::chrono::seconds(grace)); !st) return fail(st.error(), kExitError);
  auto s = store::RunStore::open(db);
  if (s) {
    (void)(*s)->set_status(*id, store::kStatusStopped, "stopped by the user");
    (void)(*s)->add_event(*id, "info", "stopped by `meshwork stop`");
  }
  std::cout << "run " << *id << ": stopped\n";
  return kExitOk;
}

}  // namespace meshwork::cli
