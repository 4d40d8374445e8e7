// `meshwork attach | stop`: following a launched run again, and stopping it (remote/run_control.h,
// remote/slurm_run.h for a Slurm run); the launch itself is in cli_remote.cpp.
//
//   meshwork attach RUN [--db PATH]
//   meshwork stop RUN [--db PATH] [--grace SECONDS]
// SSH options as for every remote subcommand: --ssh-config F, --known-hosts F, --identity F,
// --accept-new-host-keys. Exit codes: 0 ok; 1 nodes unreachable / other errors; 2 invalid input;
// 3 the run failed.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "app/cli_remote_shared.h"
#include "app/commands.h"
#include "remote/run_control.h"
#include "remote/slurm_run.h"

namespace meshwork::cli {

using namespace remote_cli;
using namespace meshwork::remote;

namespace {

// A stored run named by the one positional argument (id or name), with --db.
struct RunArg {
  std::filesystem::path db;
  store::RunId id = 0;
};

// attach and stop: their flags and the one run they name; or the exit code they end with here,
// after the usage (on --help or a wrong argument count) or a refusal.
struct RunCommand {
  Parsed flags;
  RunArg run;
};
std::variant<RunCommand, int> run_command(const Args& args, std::vector<FlagSpec> flags, std::string_view program,
                                          const char* usage) {
  auto p = parse(args, std::move(flags), program);
  if (!p) return refuse(p.error());
  if (p->switches.count("--help") || p->positional.size() != 1) {
    std::cout << usage << kSshHelp;
    if (p->switches.count("--help")) return kExitOk;
    return refuse(Error{"RUN", std::to_string(p->positional.size()) + " given", "name exactly one run (id or name)"});
  }
  RunArg r;
  r.db = db_path(*p);
  auto id = resolve(r.db, p->positional[0]);
  if (!id) return refuse(id.error());
  r.id = *id;
  return RunCommand{std::move(*p), r};
}

}  // namespace

int attach_main(const Args& args) {
  auto cmd = run_command(args, {{"--db", "PATH", ""}}, "meshwork attach",
                         "usage: meshwork attach RUN [--db PATH]\n"
                         "Follows a launched run again (after a closed workbench or a lost link): backfills every\n"
                         "metric the store lacks, then streams until the run ends.\n");
  if (const int* rc = std::get_if<int>(&cmd)) return *rc;
  const auto& [p, run] = std::get<RunCommand>(cmd);
  if (auto slurm = load_slurm_info(run.db, run.id); slurm.ok() && slurm->has_value()) {
    return follow_slurm(run.db, run.id, ssh_options(p));
  }
  auto rec = load_launch_record(run.db, run.id);
  if (!rec) return refuse(rec.error());
  return follow(run.db, run.id, *rec, ssh_options(p));
}

int stop_main(const Args& args) {
  auto cmd = run_command(args, {{"--db", "PATH", ""}, {"--grace", "SECONDS", ""}}, "meshwork stop",
                         "usage: meshwork stop RUN [--db PATH] [--grace SECONDS]\n"
                         "SIGTERM to every rank's process group on every node, SIGKILL after the grace period\n"
                         "(default 5 s).\n");
  if (const int* rc = std::get_if<int>(&cmd)) return *rc;
  const auto& [p, run] = std::get<RunCommand>(cmd);
  int grace = 5;
  if (auto st = int_value(p, "--grace", 0, 3600, grace); !st) return refuse(st.error());
  if (auto st = stop_and_record(run.db, run.id, ssh_options(p), "`meshwork stop`", std::chrono::seconds(grace)); !st)
    return refuse(st.error());
  std::cout << "run " << run.id << ": stopped\n";
  return kExitOk;
}

}  // namespace meshwork::cli
