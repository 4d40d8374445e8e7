// `meshwork probe | deploy | launch`: the remote subcommands (remote/run_control.h); their Slurm
// forms are in cli_slurm.cpp, `attach` and `stop` in cli_attach_stop.cpp.
//
//   meshwork probe HOST... [--json] | --hostfile F [--json]
//   meshwork launch --hostfile F | --hosts H1,H2 | --local  --nproc-per-node N
//                   <meshtrain shape and training flags> [--config FILE] [--db PATH] [--name NAME]
//                   [--detach] [--remote-root DIR] [--master-addr A] [--master-port P] [--meshtrain BIN]
//                   [--max-restarts N]
//   meshwork probe --slurm LOGIN [--json]
//   meshwork launch --slurm [--login HOST] --nodes N [--partition P] [--gpus-per-node G] [--nproc-per-node R]
//                   [--account A] [--qos Q] [--time T] [--sbatch-arg ARG]... <the same run config flags>
// SSH options for all of them: --ssh-config F, --known-hosts F, --identity F, --accept-new-host-keys.
// Exit codes: 0 ok; 1 nodes unreachable / other errors; 2 invalid input; 3 the run failed.
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <variant>

#include "app/cli_remote_shared.h"
#include "app/commands.h"
#include "core/cli_args.h"
#include "core/run_config_flags.h"
#include "core/store/paths.h"
#include "remote/run_control.h"
#include "remote/slurm_run.h"

namespace meshwork::cli {

// The helpers every remote subcommand shares, cli_slurm.cpp's too (app/cli_remote_shared.h).
namespace remote_cli {

using namespace meshwork::remote;

std::mutex g_out_mu;

// Prints an error (under the output lock: progress lines come from several threads).
void say_error(const Error& e) {
  std::lock_guard lock(g_out_mu);
  std::cerr << "meshwork: " << e.message() << "\n";
}

// Prints an error and returns its exit code, from its kind (core/error.h), as every command does.
int refuse(const Error& e) {
  say_error(e);
  return exit_code(e.kind);
}

// Every subcommand takes the SSH flags besides its own.
const std::vector<FlagSpec> kSshFlags = {{"--ssh-config", "FILE", ""},
                                         {"--known-hosts", "FILE", ""},
                                         {"--identity", "FILE", ""},
                                         {"--accept-new-host-keys", "", ""}};

// core's parser (core/cli_args.h) over the subcommand's flags, the SSH flags and, for launch,
// the run config flags; each given flag is then filed by the table it came from.
Result<Parsed> parse(const Args& args, std::vector<FlagSpec> flags, std::string_view program, bool run_config) {
  flags.insert(flags.end(), kSshFlags.begin(), kSshFlags.end());
  if (run_config)
    for (const RunConfigFlag& f : run_config_flags()) flags.push_back({f.name, f.arg, f.help});
  auto a = parse_args(args, flags, program);
  if (!a) return a.error();
  Parsed p;
  for (const auto& given : a->given) {
    const std::string& flag = given.first;  // a plain reference: clang 14 cannot capture a binding
    const auto& value = given.second;
    const RunConfigFlag* rf = run_config ? find_run_config_flag(flag) : nullptr;
    const bool is_switch = std::any_of(flags.begin(), flags.end(),
                                       [&](const FlagSpec& f) { return f.name == flag && f.arg.empty(); });
    if (rf) p.run_flags.emplace_back(rf, value);
    else if (is_switch) p.switches.insert(flag);
    else {
      p.values[flag] = value;
      p.every_value[flag].push_back(value);
    }
  }
  if (a->help) p.switches.insert("--help");
  p.positional = a->positional;
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

// The runtime bundle's per-node progress lines (bytes, rate, ETA), at most one a second per node
// while uploading.
void print_bundle_progress(const DeployProgress& d) {
  static std::map<size_t, std::chrono::steady_clock::time_point> last;
  std::lock_guard lock(g_out_mu);
  const auto now = std::chrono::steady_clock::now();
  if (d.stage == "uploading" && d.bytes_done != d.bytes_total && last.count(d.node) &&
      now - last[d.node] < std::chrono::seconds(1)) {
    return;
  }
  last[d.node] = now;
  std::cerr << "meshwork: bundle " << d.host << ": " << bundle_progress_text(d) << "\n";
}

// A launch's deploy: the bundle's progress lines, and one line per run file.
void print_deploy_progress(const DeployProgress& d) {
  if (d.file.find(".tar.zst") != std::string::npos) {
    print_bundle_progress(d);
    return;
  }
  if (d.stage == "uploading" && d.bytes_done != d.bytes_total) return;  // one line per file
  std::lock_guard lock(g_out_mu);
  std::cerr << "meshwork: deploy " << d.host << ": " << d.stage << (d.file.empty() ? "" : " " + d.file);
  if (d.stage == "uploading") std::cerr << " (" << d.bytes_total << " bytes)";
  std::cerr << "\n";
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

FollowOptions terminal_follow_options() {
  FollowOptions fo;
  fo.on_event = [](const std::string& level, const std::string& text) {
    std::lock_guard lock(g_out_mu);
    std::cerr << "meshwork: " << level << ": " << text << "\n";
  };
  return fo;
}

void detach_on_sigint(bool on) {
  if (!on) {
    signal(SIGINT, SIG_DFL);
    return;
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, nullptr);
}

int exit_after_follow(const Result<FollowOutcome>& outcome, store::RunId id, const std::string& what,
                      const std::function<std::string()>& failure) {
  if (!outcome) return refuse(outcome.error().as(ErrorKind::remote));
  std::cout << "run " << id << ": " << outcome->state_name() << "\n";
  switch (outcome->state) {
    case FollowOutcome::State::succeeded: return kExitOk;
    case FollowOutcome::State::detached:
      std::cerr << "meshwork: detached; the " << what << " goes on. Follow it again with `meshwork attach " << id
                << "`, stop it with `meshwork stop " << id << "`\n";
      return kExitOk;
    case FollowOutcome::State::failed:
      if (const std::string text = failure(); !text.empty()) std::cerr << "meshwork: run failed: " << text << "\n";
      return kExitNoFit;
    case FollowOutcome::State::stopped: return kExitNoFit;
  }
  return kExitError;
}

// Follows a run to its end; the exit code says how it ended.
int follow(const std::filesystem::path& db, store::RunId id, const LaunchRecord& rec, const SshOptions& ssh) {
  RunFollower follower(db, id, rec, make_connector(rec, ssh), terminal_follow_options());
  g_follower = &follower;
  detach_on_sigint(true);
  auto outcome = follower.run();
  g_follower = nullptr;
  detach_on_sigint(false);
  return exit_after_follow(outcome, id, "run", [&] {
    return outcome && outcome->root_cause ? outcome->root_cause->text() : std::string();
  });
}

Result<store::RunId> resolve(const std::filesystem::path& db, const std::string& run) {
  auto s = store::RunStore::open(db);
  if (!s) return s.error();
  return (*s)->resolve_run(run);
}

const char* const kSshHelp =
    "SSH options: --ssh-config FILE  --known-hosts FILE  --identity FILE  --accept-new-host-keys\n"
    "  (hosts: user@host:port or ~/.ssh/config aliases; unknown host keys are refused unless\n"
    "   --accept-new-host-keys, which prints each fingerprint it adds; changed keys always are)\n";

// A whole-number flag within [min, max]; absent: `out` unchanged.
Status int_value(const Parsed& p, const std::string& flag, int min, int max, int& out) {
  if (!p.values.count(flag)) return {};
  const std::string& text = p.values.at(flag);
  try {
    size_t pos = 0;
    const long long v = std::stoll(text, &pos);
    if (pos != text.size() || v < min || v > max) throw std::invalid_argument("");
    out = static_cast<int>(v);
  } catch (...) {
    return Error{flag, text, "a whole number from " + std::to_string(min) + " to " + std::to_string(max)};
  }
  return {};
}

// The run config `meshwork launch` runs: --config FILE (or the defaults), the run config flags
// on top in the order given (the same table and words as meshtrain's), the nodes from
// --hostfile / --hosts / --local with --nproc-per-node ranks each (else the file's nodes), and
// --name. The launcher ships it as it is; nothing else reaches meshtrain.
Result<RunConfig> launch_config(const Parsed& p) {
  RunConfig config;
  if (p.values.count("--config")) {
    auto c = load_run_config(p.values.at("--config"));
    if (!c) return Error{"--config", p.values.at("--config"), c.error().message(), c.error().kind};
    config = *c;
  }
  for (const auto& [flag, value] : p.run_flags)
    if (Status st = flag->apply(config, value); !st) return st.error();
  auto hosts = hosts_of(p, false);
  if (!hosts) return hosts.error();
  int nproc = 0;
  if (Status st = int_value(p, "--nproc-per-node", 1, 1 << 20, nproc); !st) return st.error();
  if (!hosts->empty()) {
    config.nodes.clear();
    config.source = SshNodesSource{};  // the hosts named here, whatever the file's cluster was
    for (const HostEntry& h : *hosts) {
      if (h.slots > 0 && nproc > 0 && h.slots != nproc)
        return Error{"slots", h.spec.to_string() + " slots=" + std::to_string(h.slots),
                     "every node runs --nproc-per-node " + std::to_string(nproc) + " ranks (torchrun style)"};
      const int slots = h.slots > 0 ? h.slots : nproc;
      if (slots < 1) return Error{"--nproc-per-node", "", "give the ranks per node (or slots= in the hostfile)"};
      config.nodes.push_back(NodeConfig{h.spec.to_string(), slots, {}});
    }
  } else if (config.nodes.empty()) {
    return Error{"--hosts", "", "give --hostfile F, --hosts H1,H2 or --local (or nodes in the --config file)"};
  } else if (nproc > 0) {
    for (NodeConfig& n : config.nodes) n.slots = nproc;
  }
  if (p.values.count("--name")) config.name = p.values.at("--name");
  if (config.name.empty()) config.name = "run";
  return config;
}

}  // namespace remote_cli

using namespace remote_cli;

int probe_main(const Args& args) {
  auto p = parse(args, {{"--hostfile", "FILE", ""}, {"--json", "", ""}, {"--slurm", "", ""}}, "meshwork probe");
  if (!p) return refuse(p.error());
  if (p->switches.count("--help")) {
    std::cout << "usage: meshwork probe HOST... [--json] | --hostfile F [--json]\n"
                 "       meshwork probe --slurm LOGIN [--json]   (a Slurm cluster's partitions, by sinfo)\n"
              << kSshHelp;
    return kExitOk;
  }
  if (p->switches.count("--slurm")) return probe_slurm_main(*p);
  auto hosts = hosts_of(*p, true);
  if (!hosts) return refuse(hosts.error());
  if (hosts->empty()) return refuse(Error{"HOST", "", "name at least one host (or --hostfile F, or local)"});
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
      say_error(r.error->error);
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

int deploy_main(const Args& args) {
  auto p = parse(args, {{"--hostfile", "FILE", ""}, {"--hosts", "H1,H2", ""}, {"--bundle", "FILE", ""},
                        {"--bundle-root", "DIR", ""}, {"--json", "", ""}},
                 "meshwork deploy");
  if (!p) return refuse(p.error());
  if (p->switches.count("--help")) {
    std::cout << "usage: meshwork deploy --bundle FILE (--hosts H1,H2 | --hostfile F | HOST...)\n"
                 "         [--bundle-root DIR] [--json]\n"
                 "Puts a runtime bundle (scripts/bundle) on the nodes ahead of a launch: once per node or\n"
                 "shared filesystem, skipped where it is, resumed after a cut link (docs/remote.md).\n"
                 "--json: per node, bytes uploaded and the seconds spent uploading and in all.\n"
              << kSshHelp;
    return kExitOk;
  }
  if (!p->values.count("--bundle")) return refuse(Error{"--bundle", "", "name the bundle to deploy (scripts/bundle cpu|cuda)"});
  auto bundle = load_bundle(p->values.at("--bundle"));
  if (!bundle) return refuse(bundle.error());
  auto hosts = hosts_of(*p, true);
  if (!hosts) return refuse(hosts.error());
  if (hosts->empty()) return refuse(Error{"--hosts", "", "name at least one host"});
  const SshOptions ssh = ssh_options(*p);
  std::vector<std::unique_ptr<Node>> nodes(hosts->size());
  std::vector<std::optional<Error>> errors(hosts->size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < hosts->size(); ++i) {
      threads.emplace_back([&, i] {
        auto conn = connect_node((*hosts)[i].spec, ssh);
        if (auto* e = std::get_if<ConnectError>(&conn)) {
          errors[i] = e->error;
        } else {
          nodes[i] = std::move(std::get<0>(conn));
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const auto& e : errors) {
    if (e) return refuse(e->as(ErrorKind::remote));
  }
  BundleDeployOptions opts;
  if (p->values.count("--bundle-root")) opts.root = p->values.at("--bundle-root");
  opts.reconnect = [&](size_t i) { return connect_node((*hosts)[i].spec, ssh); };
  // Seconds per node: the upload itself (first byte to last) and the whole deploy.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<std::optional<Clock::time_point>> up_start(nodes.size()), up_end(nodes.size()), end(nodes.size());
  const bool json = p->switches.count("--json") > 0;
  auto results = deploy_bundle_all(nodes, *bundle, opts, [&](const DeployProgress& d) {
    {
      std::lock_guard lock(g_out_mu);
      if (d.stage == "uploading" && !up_start[d.node]) up_start[d.node] = Clock::now();
      if (d.stage == "uploading" && d.bytes_done == d.bytes_total) up_end[d.node] = Clock::now();
      if (d.stage == "done" || d.stage == "skipped" || d.stage == "failed") end[d.node] = Clock::now();
    }
    print_bundle_progress(d);
  });
  int code = kExitOk;
  nlohmann::json out = nlohmann::json::array();
  auto secs = [&](const std::optional<Clock::time_point>& a, const std::optional<Clock::time_point>& b) {
    return a && b ? std::chrono::duration<double>(*b - *a).count() : 0.0;
  };
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string host = (*hosts)[i].spec.to_string();
    if (!results[i]) {
      code = kExitError;
      say_error(results[i].error());
      out.push_back({{"host", host}, {"error", results[i].error().message()}});
      continue;
    }
    const auto& r = *results[i];
    out.push_back({{"host", host}, {"dir", r.dir}, {"bytes_uploaded", r.bytes_uploaded}, {"skipped", r.skipped},
                   {"shared", r.shared}, {"reconnects", r.reconnects}, {"fsid", r.fsid},
                   {"upload_seconds", secs(up_start[i], up_end[i])},
                   {"seconds", secs(std::optional<Clock::time_point>(start), end[i])}});
  }
  if (json) std::cout << nlohmann::json{{"bundle", bundle->archive_path}, {"sha256", bundle->sha256},
                                       {"archive_size", bundle->archive_size}, {"nodes", out}}.dump(2) << "\n";
  return code;
}

int launch_main(const Args& args) { return launch_command(args, "", {}); }

int launch_command(const Args& args, const std::string& subcommand, const AfterFollow& after) {
  auto p = parse(args,
                 {{"--hostfile", "FILE", ""}, {"--hosts", "H1,H2", ""}, {"--local", "", ""},
                  {"--nproc-per-node", "N", ""}, {"--config", "FILE", ""}, {"--db", "PATH", ""},
                  {"--name", "NAME", ""}, {"--detach", "", ""}, {"--remote-root", "DIR", ""},
                  {"--master-addr", "A", ""}, {"--master-port", "P", ""}, {"--meshtrain", "BIN", ""},
                  {"--max-restarts", "N", ""}, {"--bundle", "FILE", ""}, {"--bundle-root", "DIR", ""},
                  {"--node-torch", "DIR", ""}, {"--slurm", "", ""}, {"--login", "HOST", ""},
                  {"--partition", "P", ""}, {"--nodes", "N", ""}, {"--gpus-per-node", "G", ""},
                  {"--account", "A", ""}, {"--qos", "Q", ""}, {"--time", "T", ""}, {"--sbatch-arg", "ARG", ""},
                  {"--elastic", "", ""}, {"--max-replans", "N", ""}, {"--memory-per-rank", "SIZE", ""},
                  {"--lost-after", "SECONDS", ""}},
                 "meshwork launch", /*run_config=*/true);
  if (!p) return refuse(p.error());
  if (p->switches.count("--help") && !subcommand.empty()) return kExitOk;  // the caller printed its usage
  if (p->switches.count("--help")) {
    std::string run_flags;
    for (const RunConfigFlag& f : run_config_flags()) run_flags += (run_flags.empty() ? "" : " ") + f.name;
    std::cout << "usage: meshwork launch --hostfile F | --hosts H1,H2 | --local  --nproc-per-node N\n"
                 "         [--config FILE] [run config flags, as meshtrain's] [--db PATH] [--name NAME]\n"
                 "         [--detach] [--remote-root DIR] [--master-addr A] [--master-port P]\n"
                 "         [--meshtrain BIN] [--max-restarts N] [--bundle FILE] [--bundle-root DIR]\n"
                 "         [--node-torch SITE_PACKAGES]\n"
                 "         [--elastic [--max-replans N] [--memory-per-rank SIZE] [--lost-after SECONDS]]\n"
                 "       meshwork launch --slurm [--login HOST] --nodes N [--partition P] [--gpus-per-node G]\n"
                 "         [--nproc-per-node N] [--account A] [--qos Q] [--time T] [--sbatch-arg ARG]...\n"
                 "         [--config FILE] [run config flags] [--db PATH] [--name NAME] [--detach] ...\n"
                 "Run config flags set the fields of --config's run config (or of the defaults):\n  "
              << run_flags << "\n"
              << "Probes the nodes, checks the layout against them, deploys meshtrain and the run config\n"
                 "(run_config.json) into a private run directory on each, starts one supervisor per node\n"
                 "(`meshtrain --config run_config.json` plus the node's rank and the master's address;\n"
                 "detached: the run outlives this command) and streams every rank's metrics into the\n"
                 "store until the run ends. Without host flags, the --config file's nodes are used.\n"
                 "--max-restarts N: when a rank fails, every node starts all its ranks again from the\n"
                 "latest checkpoint (--checkpoint-every K), at most N times; done on the nodes, so it\n"
                 "works with --detach too.\n"
                 "--elastic: a lost node stops the rest; the run goes on at once from its last checkpoint\n"
                 "on the nodes left, re-planned, as a new segment of the same run (at most --max-replans N,\n"
                 "default 3; --memory-per-rank SIZE for the re-plan). A node unreachable --lost-after\n"
                 "SECONDS (default 60; 0: never) counts as lost. Checkpoints on a filesystem every node\n"
                 "reaches. Nothing fits: the message says what would, nothing relaunched (docs/elastic.md).\n"
                 "With --slurm the job is resubmitted on the survivors (sbatch --exclude the lost nodes).\n"
                 "--bundle FILE: run a runtime bundle (scripts/bundle cpu|cuda: meshtrain with its libraries)\n"
                 "instead of --meshtrain, for nodes without LibTorch: uploaded once per node or shared\n"
                 "filesystem into --bundle-root (default ~/.cache/meshwork/bundles), skipped when there,\n"
                 "resumed after a cut link. A CUDA run checks each node's driver against the bundle first.\n"
                 "--bundle cpu (or cuda): the bundle that came with meshwork (the installed package's, or\n"
                 "the build tree's build/bundles/).\n"
                 "--node-torch DIR: the nodes have the same torch wheel, in site-packages DIR (absolute):\n"
                 "meshtrain is deployed with its library path moved there (no bundle needed).\n"
                 "--slurm: through a Slurm login node (--login, default this machine): an sbatch script\n"
                 "(job.sbatch in the run directory, which must be on a filesystem the nodes share) runs\n"
                 "one supervisor per node with srun; the job id is recorded; stop is scancel. With\n"
                 "--bundle, the bundle is deployed once through the login node into --bundle-root, which\n"
                 "(like --remote-root) must be on the filesystem the compute nodes share.\n"
                 "Exit 0: the run succeeded (or started, with --detach); 3: it failed; 2: invalid input.\n"
              << kSshHelp;
    return kExitOk;
  }
  if (!p->positional.empty()) return refuse(Error{"launch", p->positional[0], "takes no positional arguments"});
  if (p->switches.count("--slurm")) return launch_slurm_main(*p, subcommand, after);
  auto config = launch_config(*p);
  if (!config) return refuse(config.error());
  LaunchRequest req;
  req.config = *config;
  req.subcommand = subcommand;
  // meshtrain calibrate builds its own group layouts: any valid shape of the world will do.
  if (subcommand == "calibrate") req.config.mesh = MeshShape{1, -1, 1, 1};
  int port = 0;
  if (auto st = int_value(*p, "--master-port", 1, 65535, port); !st) return refuse(st.error());
  req.master_port = port;
  if (auto st = int_value(*p, "--max-restarts", 0, 1000, req.max_restarts); !st) return refuse(st.error());
  if (p->values.count("--remote-root")) req.remote_root = p->values.at("--remote-root");
  if (p->values.count("--master-addr")) req.master_addr = p->values.at("--master-addr");
  if (auto st = fill_runtime(*p, req); !st) return refuse(st.error());
  if (auto st = check_elastic_flags(*p, subcommand); !st) return refuse(st.error());
  const bool elastic = p->switches.count("--elastic") > 0;
  const auto db = db_path(*p);
  auto launched = launch_run(db, req);
  if (auto* e = std::get_if<LaunchError>(&launched)) {
    for (size_t i = 1; i < e->more.size(); ++i) say_error(e->more[i]);
    return refuse(e->error);
  }
  const LaunchedRun& run = std::get<LaunchedRun>(launched);
  std::cout << "run " << run.id << ": started on " << run.record.nodes.size() << " node(s) in "
            << run.record.nodes[0].run_dir << "\n"
            << std::flush;
  if (p->switches.count("--detach")) return kExitOk;
  if (elastic) return follow_elastic_cli(*p, db, run.id, run.record, req);
  const int rc = follow(db, run.id, run.record, req.ssh);
  return after ? after(db, run.id, run.record, rc) : rc;
}

}  // namespace meshwork::cli
