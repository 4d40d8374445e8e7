#include "remote/rank_inspect.h"

#include "core/shell_quote.h"
#include "remote/launch.h"
#include "remote/node.h"
#include "remote/run_control.h"

namespace meshwork::remote {

std::string inspect_command(int64_t pid, const std::string& log_path, int log_lines) {
  const std::string p = std::to_string(pid);
  // gdb may wait forever on a process another tracer holds, or on a stopped one on old kernels:
  // it gets a bounded time; so does eu-stack. A debugger ended by that bound (or dying) while
  // its attach stop is pending leaves the process stopped: a process that was not stopped before
  // is continued, so fetching a stack never hangs the run; one the user stopped stays stopped.
  return "pid=" + p + "; "
         "was=$(awk '{print $3}' /proc/$pid/stat 2>/dev/null); "
         "if [ ! -d /proc/$pid ]; then echo 'tool: proc'; echo \"process $pid: gone\"; "
         "elif command -v gdb >/dev/null 2>&1; then echo 'tool: gdb'; "
         "timeout 20 gdb -nx -p $pid -batch -ex 'set pagination off' -ex 'thread apply all bt' 2>&1 "
         "| grep -v '^\\[New LWP\\|^\\[Thread debugging\\|^Using host libthread' | tail -n 400; "
         "elif command -v eu-stack >/dev/null 2>&1; then echo 'tool: eu-stack'; timeout 20 eu-stack -p $pid 2>&1 | tail -n 400; "
         "else echo 'tool: proc'; fi; "
         "now=$(awk '{print $3}' /proc/$pid/stat 2>/dev/null); "
         "case \"$was\" in T|t) ;; *) case \"$now\" in T|t) kill -CONT $pid 2>/dev/null && "
         "echo 'resumed: the debugger left it stopped';; esac;; esac; "
         "if [ -d /proc/$pid ]; then "
         "echo \"state: $(awk '{print $3}' /proc/$pid/stat 2>/dev/null)\"; "
         "for t in /proc/$pid/task/*; do echo \"thread ${t##*/} $(cat $t/comm 2>/dev/null): wchan $(cat $t/wchan 2>/dev/null)\"; done; "
         "cat /proc/$pid/stack 2>/dev/null; fi; "
         "echo '--- log ---'; tail -n " + std::to_string(log_lines) + " " + shell_quote(log_path) + " 2>&1; true";
}

Result<RankInspection> inspect_rank(const std::filesystem::path& db, store::RunId run, int rank, const SshOptions& ssh,
                                    int log_lines) {
  Result<LaunchRecord> rec = load_launch_record(db, run);
  if (!rec) {
    return Error{"run", std::to_string(run),
                 "has no launch record to reach its nodes (" + rec.error().message() + ")"};
  }
  if (rank < 0 || rank >= rec->world_size()) {
    return Error{"rank", std::to_string(rank), "a rank of the run, 0 to " + std::to_string(rec->world_size() - 1)};
  }
  size_t node = 0;
  while (node + 1 < rec->nodes.size() && rec->first_rank(node + 1) <= rank) ++node;
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  Result<std::vector<store::RankInfo>> ranks = (*store)->ranks(run);
  if (!ranks) return ranks.error();
  int64_t pid = 0;
  for (const store::RankInfo& r : *ranks) {
    if (r.rank == rank) pid = r.pid;
  }
  if (pid <= 0) return Error{"rank", std::to_string(rank), "has reported no pid yet (its start record)"};

  RankInspection out;
  out.rank = rank;
  out.node = static_cast<int>(node);
  out.host = rec->nodes[node].host;
  out.pid = pid;
  auto conn = make_connector(*rec, ssh)(node);
  if (auto* err = std::get_if<ConnectError>(&conn)) return err->error;
  std::unique_ptr<Node>& n = std::get<std::unique_ptr<Node>>(conn);
  const std::string log = rec->nodes[node].run_dir + "/rank" + std::to_string(rank) + ".log";
  Result<ExecResult> r = n->exec(inspect_command(pid, log, log_lines), std::chrono::seconds(60));
  if (!r) return r.error();
  std::string text = r->out;
  if (text.rfind("tool: ", 0) == 0) {
    const size_t nl = text.find('\n');
    out.tool = text.substr(6, nl == std::string::npos ? std::string::npos : nl - 6);
    text = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  const size_t cut = text.find("--- log ---\n");
  if (cut != std::string::npos) {
    out.stack = text.substr(0, cut);
    out.log_tail = text.substr(cut + 12);
  } else {
    out.stack = text;
  }
  return out;
}

}  // namespace meshwork::remote
