// `meshwork diagnose RUN [--json] [--db PATH] [--hang-after SECONDS]`: where a run hangs or slows,
// from what the store holds (core/hang_diagnosis.h): the ranks' steps, the stall reports the
// follower keeps (core/store/rank_states.h) and the ranks' end records.
// `meshwork diagnose RUN --stack RANK [SSH options]`: that rank's native stack and log tail, read
// on its node (remote/rank_inspect.h).
//
// Exit 0 when healthy (or ended ok), 3 when hung, mismatched, straggling or failed, 2 on bad input, 1 when the
// store cannot be read. The JSON is store::RunHealth::to_json(): Diagnosis::to_json() plus "run", "status"
// and "follower" (the web view's /api/runs/ID/health answers the same).
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/commands.h"
#include "core/cli_args.h"
#include "core/hang_diagnosis.h"
#include "core/store/paths.h"
#include "core/store/rank_states.h"
#include "core/store/run_store.h"
#include "remote/rank_inspect.h"

namespace meshwork::cli {

namespace {

const char* const kUsage =
    "usage: meshwork diagnose RUN [--json] [--db PATH] [--hang-after SECONDS]\n"
    "       meshwork diagnose RUN --stack RANK [--db PATH] [SSH options]\n"
    "Says whether a run is healthy, hung (which ranks wait in which collective on which axis, and\n"
    "the ranks they wait for: their node, pid, process state and phase), mismatched (ranks calling\n"
    "different collectives at the same point) or straggling (which rank is slow, and in what).\n"
    "A run is hung when no rank completed a step for --hang-after seconds (default: the larger of\n"
    "60 s and 5 x the median step). The ranks' states come from the follower (`meshwork launch`,\n"
    "`meshwork attach` or the workbench while it follows the run).\n"
    "Exit 0: healthy or ended ok; 3: hung, mismatched, straggling or failed.\n"
    "--stack RANK prints the rank's native stack (gdb, else eu-stack, else the kernel's wchan and\n"
    "/proc/PID/stack) and the last lines of its log, read on its node over SSH.\n"
    "SSH options: --ssh-config FILE  --known-hosts FILE  --identity FILE  --accept-new-host-keys\n";

int stack_main(const ParsedArgs& f, const std::filesystem::path& db, store::RunId run) {
  Result<int64_t> rank = f.integer("--stack", 0, 1 << 30, "a rank of the run");
  if (!rank) return fail(rank.error());
  remote::SshOptions ssh;
  if (auto v = f.value("--ssh-config")) ssh.ssh_config = *v;
  if (auto v = f.value("--known-hosts")) ssh.known_hosts = *v;
  if (auto v = f.value("--identity")) ssh.identity = *v;
  if (f.has("--accept-new-host-keys")) {
    ssh.on_unknown_host_key = [](const std::string& host, const std::string& fp) {
      std::cerr << "meshwork: added host key of " << host << ": " << fp << "\n";
      return true;
    };
  }
  Result<remote::RankInspection> r = remote::inspect_rank(db, run, static_cast<int>(*rank), ssh);
  if (!r) return fail(r.error());
  std::cout << "rank " << r->rank << " on node " << r->node << " (" << r->host << "), pid " << r->pid << ", stack by "
            << r->tool << ":\n"
            << r->stack << "\nlast lines of rank" << r->rank << ".log:\n"
            << r->log_tail;
  return kExitOk;
}

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string seconds(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(s < 1 ? 3 : 2) << s << " s";
  return out.str();
}

void print_text(const Diagnosis& d, const std::string& status, store::RunId run) {
  std::cout << "run " << run << " (" << status << "): " << d.summary() << "\n";
  if (!d.waiting.empty()) {
    std::cout << "\nwaiting:\n";
    for (const WaitingGroup& g : d.waiting) {
      std::cout << "  " << g.op << " on " << g.axis << " #" << g.seq << " (" << g.bytes << " bytes): ranks "
                << rank_ranges(g.ranks);
      if (!g.missing.empty()) std::cout << "; never entered: " << rank_ranges(g.missing);
      std::cout << "\n";
    }
  }
  if (!d.culprits.empty()) {
    std::cout << "\nculprits:\n";
    for (const Culprit& c : d.culprits) {
      std::cout << "  rank " << c.rank << "  node " << c.node << (c.host.empty() ? "" : " (" + c.host + ")")
                << "  pid " << c.pid << "  " << (c.process.empty() ? "process unknown" : c.process) << "  "
                << c.phase;
      if (!c.ended.empty()) std::cout << "  ended: " << c.ended;
      std::cout << "\n";
    }
  }
  if (!d.mismatches.empty()) {
    std::cout << "\nmismatches:\n";
    for (const Mismatch& m : d.mismatches) {
      std::cout << "  " << m.axis << " #" << m.seq << ":";
      for (const MismatchSide& s : m.sides)
        std::cout << "  [" << s.op << ", " << s.bytes << " bytes: ranks " << rank_ranges(s.ranks) << "]";
      std::cout << "\n";
    }
  }
  if (!d.stragglers.empty()) {
    std::cout << "\nstragglers:\n";
    for (const Straggler& s : d.stragglers) {
      std::cout << "  rank " << s.rank << "  node " << s.node << (s.host.empty() ? "" : " (" + s.host + ")")
                << (s.slow_in == "not running" ? "  not running, waited on" : "  slow in " + s.slow_in) << ": "
                << seconds(s.seconds) << " per step (median rank " << seconds(s.median_s) << ")\n";
    }
  }
  for (const std::string& n : d.notes) std::cout << "note: " << n << "\n";
}

}  // namespace

int diagnose_main(const Args& args) {
  auto f = parse_args(args,
                      {{"--db", "PATH", ""},
                       {"--json", "", ""},
                       {"--hang-after", "SECONDS", ""},
                       {"--stack", "RANK", ""},
                       {"--ssh-config", "FILE", ""},
                       {"--known-hosts", "FILE", ""},
                       {"--identity", "FILE", ""},
                       {"--accept-new-host-keys", "", ""}},
                      "meshwork diagnose");
  if (!f) return fail(f.error());
  if (f->help) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (f->positional.size() != 1) {
    std::cerr << kUsage;
    return fail(Error{"RUN", std::to_string(f->positional.size()) + " given", "name exactly one run (id or name)"});
  }
  std::optional<double> hang_after;
  if (f->has("--hang-after")) {
    Result<double> t = f->number("--hang-after", 1, 7 * 86400, "seconds, 1 to 604800");
    if (!t) return fail(t.error());
    hang_after = *t;
  }
  const std::optional<std::string> db_flag = f->value("--db");
  const std::filesystem::path db = db_flag ? std::filesystem::path(*db_flag) : store::default_db_path();
  auto s = store::RunStore::open(db);
  if (!s) return fail(s.error());
  Result<store::RunId> run = (*s)->resolve_run(f->positional[0]);
  if (!run) return fail(run.error());
  if (f->has("--stack")) {
    s->reset();
    return stack_main(*f, db, *run);
  }
  Result<store::RunHealth> health = store::run_health(**s, *run, now_s(), hang_after);
  if (!health) return fail(health.error());
  const Diagnosis& d = health->diagnosis;
  if (f->has("--json")) std::cout << health->to_json(*run).dump(2) << "\n";
  else print_text(d, health->status, *run);
  return d.state == HealthState::healthy ? kExitOk : kExitNoFit;
}

}  // namespace meshwork::cli
