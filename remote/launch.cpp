#include "remote/launch.h"

#include <algorithm>

#include "remote/parse_util.h"
#include "remote/probe_parsers.h"
#include "remote/run_layout.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

using namespace detail;

int LaunchRecord::first_rank(size_t node) const {
  int r = 0;
  for (size_t i = 0; i < node && i < nodes.size(); ++i) r += nodes[i].slots;
  return r;
}

int LaunchRecord::world_size() const { return first_rank(nodes.size()); }

std::string LaunchRecord::source_of(size_t node, int rank) const {
  const std::string source = metrics_source(static_cast<int>(node), rank);
  return segment > 0 ? "seg" + std::to_string(segment) + "/" + source : source;
}

nlohmann::json to_json(const LaunchRecord& r) {
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const auto& n = r.nodes[i];
    // "command": what the node runs, kept for the user (and the launch tests) to read.
    nodes.push_back({{"host", n.host}, {"slots", n.slots}, {"run_dir", n.run_dir}, {"address", n.address},
                     {"command", meshtrain_command(r, i)}});
  }
  return {{"nodes", nodes}, {"master_addr", r.master_addr}, {"master_port", r.master_port},
          {"trainer", r.trainer}, {"max_restarts", r.max_restarts}, {"subcommand", r.subcommand},
          {"segment", r.segment}, {"checkpoint_dir", r.checkpoint_dir}, {"resume", r.resume}};
}

Result<LaunchRecord> launch_record_from_json(const nlohmann::json& j) {
  LaunchRecord r;
  try {
    for (const auto& n : j.at("nodes")) {
      r.nodes.push_back({n.at("host").get<std::string>(), n.at("slots").get<int>(),
                         n.at("run_dir").get<std::string>(), n.value("address", std::string())});
    }
    r.master_addr = j.value("master_addr", std::string());
    r.master_port = j.value("master_port", 0);
    r.trainer = j.value("trainer", std::string("meshtrain"));
    r.max_restarts = j.value("max_restarts", 0);
    r.subcommand = j.value("subcommand", std::string());
    r.segment = j.value("segment", 0);
    r.checkpoint_dir = j.value("checkpoint_dir", std::string());
    r.resume = j.value("resume", false);
  } catch (const std::exception& e) {
    return Error{"run.cluster", j.dump().substr(0, 120), std::string("is not a launch record: ") + e.what()};
  }
  if (r.nodes.empty()) return Error{"run.cluster", "", "names no node (was the run launched by meshwork?)"};
  return r;
}

std::vector<std::string> meshtrain_command(const LaunchRecord& rec, size_t index) {
  // --run-dir .: the wrapper starts meshtrain in the run directory, so the command is the same
  // on every launch of the same run config and placement (the port aside).
  std::vector<std::string> cmd = {"./" + rec.trainer};
  if (!rec.subcommand.empty()) cmd.push_back(rec.subcommand);
  for (std::string a : {std::string("--config"), std::string(kRunConfigFile),
                        std::string("--nproc-per-node"), std::to_string(rec.nodes[index].slots),
                        std::string("--nnodes"), std::to_string(rec.nodes.size()),
                        std::string("--node-rank"), std::to_string(index),
                        std::string("--master-addr"), rec.master_addr,
                        std::string("--master-port"), std::to_string(rec.master_port),
                        std::string("--run-dir"), std::string(".")})
    cmd.push_back(std::move(a));
  if (!rec.checkpoint_dir.empty()) {
    cmd.push_back("--checkpoint-dir");
    cmd.push_back(rec.checkpoint_dir);
  }
  if (rec.resume) cmd.push_back("--resume");
  return cmd;
}

std::string supervisor_command(const LaunchRecord& rec, size_t index) {
  const auto& n = rec.nodes[index];
  const std::string i = std::to_string(index);
  std::vector<std::string> argv = {
      "env",
      // torchrun's environment, for the supervisor and whatever it spawns.
      "MASTER_ADDR=" + rec.master_addr, "MASTER_PORT=" + std::to_string(rec.master_port),
      "WORLD_SIZE=" + std::to_string(rec.world_size()), "NNODES=" + std::to_string(rec.nodes.size()),
      "NODE_RANK=" + i, "LOCAL_WORLD_SIZE=" + std::to_string(n.slots),
      // Gloo binds to the address of the node's hostname unless told otherwise, and hostnames
      // often resolve to loopback (and are not even distinct on the namespace test cluster): give
      // it the node's address as the others reach it (meshtrain honours this, and
      // GLOO_SOCKET_IFNAME when the user sets one).
      "MESHWORK_GLOO_HOSTNAME=" + (index == 0 ? rec.master_addr : n.address)};
  const std::vector<std::string> trainer = meshtrain_command(rec, index);
  argv.insert(argv.end(), trainer.begin(), trainer.end());
  // The wrapper: `sh -c SCRIPT sh ARGV...` runs ARGV as "$@" (no re-parsing of any value), then
  // writes "<status> <time>" atomically. Its TERM trap is a handler, not an ignore, so the
  // trainer (exec'd by the shell) keeps the default TERM disposition, and the wrapper survives a
  // group SIGTERM long enough to record how the trainer ended.
  // With restarts it loops (see launch.h): $x holds the extra flags of attempts after the first.
  // The sleep lets a `meshwork stop` that raced with the failure leave node<i>.stop first.
  const int node = static_cast<int>(index);
  const std::string wrapper =
      "trap : TERM; a=0; x=; while :; do \"$@\" $x; s=$?; "
      "if [ $s -eq 0 ] || [ $a -ge " + std::to_string(std::max(0, rec.max_restarts)) + " ]; then break; fi; "
      "sleep 2; [ -e " + node_file(node, ".stop") + " ] && break; a=$((a+1)); "
      "echo \"$a $s $(date +%s.%N)\" >> " + node_file(node, ".restarts") + "; "
      "x=\"--resume --master-port $((" + std::to_string(rec.master_port) + "+a))\"; done; "
      "echo \"$s $(date +%s.%N)\" > " + node_file(node, ".exit.tmp") +
      " && mv -f " + node_file(node, ".exit.tmp") + " " + node_file(node, ".exit");
  std::vector<std::string> wrapped = {"setsid", "nohup", "sh", "-c", wrapper, "sh"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  // setsid in a background job of a non-interactive shell does not fork (the job is not a group
  // leader), so $! is the new session's id = the process group of everything it starts.
  // The braces matter: `a && b &` would put the whole and-list in a background subshell that
  // holds the SSH channel's pipes open until the trainer ends.
  return "cd -- " + shell_quote(n.run_dir) + " && rm -f " + node_file(static_cast<int>(index), ".exit") + " " +
         node_file(static_cast<int>(index), ".restarts") + " && { " +
         shell_join(wrapped) + " > " + node_file(static_cast<int>(index), ".out") + " 2> " +
         node_file(static_cast<int>(index), ".err") + " < /dev/null & echo $! > " +
         node_file(static_cast<int>(index), ".pgid") + "; } && cat " + node_file(static_cast<int>(index), ".pgid");
}

Result<int64_t> start_node(Node& node, const LaunchRecord& rec, size_t index) {
  auto r = node.exec(supervisor_command(rec, index), std::chrono::seconds(30), {});
  if (!r) return r.error();
  auto pg = to_int(trim(r->out));
  if (r->exit_code != 0 || !pg || *pg <= 1) {
    return Error{node.name(), "start meshtrain", "failed (exit " + std::to_string(r->exit_code) + "): " +
                                                     std::string(trim(r->err)).substr(0, 400)};
  }
  return static_cast<int64_t>(*pg);
}

Result<std::optional<NodeExit>> read_node_exit(Node& node, const LaunchRecord& rec, size_t index) {
  auto text = node.read_range(rec.nodes[index].run_dir + "/" + node_file(static_cast<int>(index), ".exit"), 0, 256);
  if (!text) return text.error();
  if (!text->has_value()) return std::optional<NodeExit>();
  auto w = words(**text);
  NodeExit e;
  if (w.empty() || !to_int(w[0])) return std::optional<NodeExit>();  // being written
  e.status = static_cast<int>(*to_int(w[0]));
  if (w.size() > 1) e.time = leading_number(w[1]).value_or(0);
  return std::optional<NodeExit>(e);
}

namespace {

// A shell fragment that sets $pids to the node's live processes: the supervisor's group (as
// "-PGID") and the rank pids meshtrain recorded for this node's ranks. A pid is only taken if
// /proc says it still runs something from this run directory or meshtrain, so a stale pid file
// can never make us signal an unrelated process that reused the number.
// No `--` after kill's signal: dash's kill (the local node's /bin/sh) rejects it ("Illegal number:
// -"), so stop and the group check silently did nothing there; `kill -SIG -PGID` works in dash,
// bash and busybox alike.
std::string collect_pids(const LaunchRecord& rec, size_t index) {
  const int first = rec.first_rank(index);
  // meshtrain's supervisor writes supervisor-node<i>.pid and one rank<r>.pid per rank.
  std::string ranks = " supervisor-node" + std::to_string(index) + ".pid";
  for (int r = first; r < first + rec.nodes[index].slots; ++r) ranks += " rank" + std::to_string(r) + ".pid";
  return "pids=''; pg=$(cat " + node_file(static_cast<int>(index), ".pgid") +
         " 2>/dev/null); "
         "if [ -n \"$pg\" ] && kill -0 -\"$pg\" 2>/dev/null; then pids=\"-$pg\"; fi; "
         "for f in" + ranks + "; do [ -f \"$f\" ] || continue; p=$(tr -dc 0-9 < \"$f\"); [ -n \"$p\" ] || continue; "
         "kill -0 \"$p\" 2>/dev/null && grep -qa -e meshtrain -e \"$PWD\" /proc/\"$p\"/cmdline 2>/dev/null && pids=\"$pids $p\"; done; ";
}

}  // namespace

Status stop_node(Node& node, const LaunchRecord& rec, size_t index, std::chrono::milliseconds grace) {
  const long tenths = std::max<long>(1, static_cast<long>(grace.count() / 100));
  const std::string script =
      "cd -- " + shell_quote(rec.nodes[index].run_dir) + " 2>/dev/null || exit 0; " + collect_pids(rec, index) +
      "[ -z \"$pids\" ] && { echo none; exit 0; }; : > " + node_file(static_cast<int>(index), ".stop") + "; "
      "for p in $pids; do kill -TERM \"$p\" 2>/dev/null; done; "
      "i=0; while [ $i -lt " + std::to_string(tenths) + " ]; do " + collect_pids(rec, index) +
      "[ -z \"$pids\" ] && { echo terminated; exit 0; }; sleep 0.1; i=$((i+1)); done; "
      "for p in $pids; do kill -KILL \"$p\" 2>/dev/null; done; echo killed";
  auto r = node.exec(script, std::chrono::seconds(30) + std::chrono::duration_cast<std::chrono::seconds>(grace), {});
  if (!r) return r.error();
  if (r->exit_code != 0) return Error{node.name(), "stop", "failed: " + std::string(trim(r->err)).substr(0, 300)};
  return {};
}

Result<bool> node_alive(Node& node, const LaunchRecord& rec, size_t index) {
  auto r = node.exec("cd -- " + shell_quote(rec.nodes[index].run_dir) + " 2>/dev/null || exit 0; " +
                         collect_pids(rec, index) + "echo \"x$pids\"",
                     std::chrono::seconds(30), {});
  if (!r) return r.error();
  return std::string(trim(r->out)) != "x";
}

}  // namespace meshwork::remote
