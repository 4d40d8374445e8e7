// Going on after a lost node (remote/elastic.h, docs/elastic.md):
//
//   meshwork resume RUN [--hosts H1,H2] [--dry-run] [--memory-per-rank SIZE] [--detach]
//                   [--elastic [--max-replans N] [--lost-after SECONDS]] [--meshtrain BIN | --bundle FILE ...]
//   meshwork launch ... --elastic [--max-replans N] [--memory-per-rank SIZE] [--lost-after SECONDS]
//                   (cli_remote.cpp)
//
// A Slurm run (launch --slurm --elastic, or resume of a Slurm run) is resubmitted with sbatch on
// the survivors (remote/slurm_elastic.h); resume's --hosts then names the Slurm nodes to keep.
// Both re-plan with core's replan_for_survivors() and launch a new segment of the same run from
// its last complete checkpoint; when nothing fits, the message names what would and nothing is
// launched (exit 3, does_not_fit).
#include <algorithm>
#include <functional>
#include <iostream>

#include "app/cli_remote_shared.h"
#include "app/commands.h"
#include "core/units.h"
#include "remote/elastic.h"
#include "remote/slurm_elastic.h"
#include "remote/host_spec.h"
#include "remote/slurm_run.h"

namespace meshwork::cli {

namespace remote_cli {

using namespace meshwork::remote;

Status fill_runtime(const Parsed& p, LaunchRequest& req) {
  req.trainer_path = p.values.count("--meshtrain") ? p.values.at("--meshtrain") : self_dir() + "/meshtrain";
  req.ssh = ssh_options(p);
  req.on_step = [](const std::string& s) {
    std::lock_guard lock(g_out_mu);
    std::cerr << "meshwork: " << s << "\n";
  };
  if (p.values.count("--bundle")) req.bundle_path = p.values.at("--bundle");
  if (p.values.count("--bundle-root")) req.bundle_root = p.values.at("--bundle-root");
  if (p.values.count("--node-torch")) req.node_torch = p.values.at("--node-torch");
  req.on_deploy = print_deploy_progress;
  return {};
}

namespace {

struct ElasticFlags {
  int max_replans = 3;
  int64_t memory_per_rank = 0;
  int lost_after_s = 60;
};

// The shortest --lost-after: a stream is found silent only after 3 missed heartbeats + 2 s
// (8 s, FollowOptions::heartbeat) and a connection attempt may take 10 s more; a shorter limit
// would only make a slow node look lost.
constexpr int kMinLostAfter = 10;

Result<ElasticFlags> elastic_flags(const Parsed& p) {
  ElasticFlags f;
  if (Status st = int_value(p, "--max-replans", 0, 100, f.max_replans); !st) return st.error();
  if (p.values.count("--lost-after")) {
    int s = -1;
    const Status st = int_value(p, "--lost-after", 0, 86400, s);
    if (!st || (s > 0 && s < kMinLostAfter))
      return Error{"--lost-after", p.values.at("--lost-after"),
                   "whole seconds from " + std::to_string(kMinLostAfter) +
                       " to 86400 (a node unreachable that long is lost), or 0: never"};
    f.lost_after_s = s;
  }
  if (p.values.count("--memory-per-rank")) {
    auto bytes = parse_size(p.values.at("--memory-per-rank"), "--memory-per-rank");
    if (!bytes) return bytes.error();
    f.memory_per_rank = *bytes;
  }
  return f;
}

void print_notice(const std::string& level, const std::string& text) {
  std::lock_guard lock(g_out_mu);
  std::cerr << "meshwork: " << level << ": " << text << "\n";
}

}  // namespace

Status check_elastic_flags(const Parsed& p, const std::string& subcommand) {
  const bool elastic = p.switches.count("--elastic") > 0;
  for (const char* flag : {"--max-replans", "--memory-per-rank", "--lost-after"})
    if (!elastic && p.values.count(flag)) return Error{flag, p.values.at(flag), "only with --elastic"};
  if (elastic && p.switches.count("--detach"))
    return Error{"--elastic", "--detach", "an elastic run is re-planned by the command that follows it: not with --detach"};
  if (elastic && !subcommand.empty()) return Error{"--elastic", subcommand, "for training runs only"};
  // Their values too, before anything is launched: the follow after the launch reads them again.
  if (elastic)
    if (auto flags = elastic_flags(p); !flags) return flags.error();
  return {};
}

namespace {

// The options of an elastic follow from the flags, and the exit code of how it ended.
int follow_elastic_with(const Parsed& p, store::RunId id,
                        const std::function<Result<ElasticOutcome>(const ElasticOptions&)>& follow) {
  auto flags = elastic_flags(p);
  if (!flags) return refuse(flags.error());
  ElasticOptions opt;
  opt.max_replans = flags->max_replans;
  opt.memory_per_rank = flags->memory_per_rank;
  opt.lost_after = std::chrono::seconds(flags->lost_after_s);
  opt.follow = terminal_follow_options();
  opt.on_notice = print_notice;
  opt.on_follower = [](RunFollower* f) {
    g_follower = f;
    detach_on_sigint(f != nullptr);
  };
  auto outcome = follow(opt);
  if (!outcome) return refuse(outcome.error().as(ErrorKind::remote));
  if (outcome->refused) {
    std::cout << "run " << id << ": failed; nothing relaunched\n";
    return exit_code(outcome->refused->kind);
  }
  if (outcome->replans > 0)
    std::cout << "run " << id << ": " << outcome->replans + 1 << " segments (re-planned " << outcome->replans
              << " time(s))\n";
  return exit_after_follow(Result<FollowOutcome>(outcome->last), id, "run", [&] {
    return outcome->last.root_cause ? outcome->last.root_cause->text() : std::string();
  });
}

// `meshwork resume` of a Slurm run: the lost job nodes (or those --hosts leaves out, by their
// Slurm names) are excluded, the job resubmitted on the survivors from the last checkpoint.
int resume_slurm(const Parsed& p, const std::filesystem::path& db, store::RunId id, const LaunchRequest& req,
                 const ElasticFlags& flags) {
  if (p.values.count("--lost-after"))  // the follower reaches the login node only
    return refuse(Error{"--lost-after", p.values.at("--lost-after"),
                        "SSH nodes only: Slurm says which of a job's nodes are lost (SlurmdTimeout)"});
  auto loss = find_lost_slurm_nodes(db, id, req.ssh);
  if (!loss) return refuse(loss.error());
  if (p.values.count("--hosts")) {
    std::string known;
    for (const std::string& s : loss->job_nodes) known += (known.empty() ? "" : ", ") + s;
    std::vector<std::string> keep;
    const std::string given = p.values.at("--hosts");
    for (size_t from = 0; from <= given.size();) {
      const size_t comma = std::min(given.find(',', from), given.size());
      const std::string name = given.substr(from, comma - from);
      from = comma + 1;
      if (name.empty()) continue;
      if (std::find(loss->job_nodes.begin(), loss->job_nodes.end(), name) == loss->job_nodes.end())
        return refuse(Error{"--hosts", name, "a Slurm node of the run's last job: " + known});
      keep.push_back(name);
    }
    loss->lost.clear();
    loss->exclude.clear();
    for (size_t i = 0; i < loss->job_nodes.size(); ++i) {
      const std::string& slurm_node = loss->job_nodes[i];
      if (std::find(keep.begin(), keep.end(), slurm_node) != keep.end()) continue;
      loss->lost.push_back(LostNode{i, loss->node_names[i], "left out by --hosts"});
      if (!slurm_node.empty()) loss->exclude.push_back(slurm_node);
    }
  }
  std::vector<std::string> lost;
  for (const LostNode& l : loss->lost) lost.push_back(l.host);
  auto rec = load_launch_record(db, id);
  if (!rec) return refuse(rec.error());
  auto plan = plan_resume(ResumeInput{db, id, lost, flags.memory_per_rank}, make_connector(*rec, req.ssh));
  if (!plan) {
    say_error(plan.error());
    std::cerr << "meshwork: resume: nothing launched\n";
    return exit_code(plan.error().kind);
  }
  name_slurm_nodes(*plan, *loss);
  std::cout << "run " << id << ": re-planned for " << plan->new_nodes << "\n" << plan->text() << "\n" << std::flush;
  if (p.switches.count("--dry-run")) return kExitOk;
  std::string cause = "resumed by `meshwork resume` on " + plan->new_nodes;
  for (const LostNode& l : loss->lost) cause += "; node " + std::to_string(l.index) + " (" + l.host + "): " + l.why;
  auto job = stored_slurm_request(db, id, req);
  if (!job) return refuse(job.error());
  auto launched = launch_slurm_segment(db, *plan, *job, loss->exclude, cause);
  if (auto* e = std::get_if<LaunchError>(&launched)) {
    for (size_t i = 1; i < e->more.size(); ++i) say_error(e->more[i]);
    return refuse(e->error);
  }
  const LaunchedRun& run = std::get<LaunchedRun>(launched);
  auto submitted = load_slurm_info(db, id);
  std::cout << "run " << id << ": segment " << run.record.segment << " submitted as Slurm job "
            << (submitted && *submitted ? (*submitted)->job_id : std::string("?")) << " in "
            << run.record.nodes[0].run_dir << "\n"
            << std::flush;
  if (p.switches.count("--detach")) return kExitOk;
  if (p.switches.count("--elastic")) return follow_elastic_slurm_cli(p, db, id, req);
  return follow_slurm(db, id, req.ssh);
}

}  // namespace

int follow_elastic_cli(const Parsed& p, const std::filesystem::path& db, store::RunId id, const LaunchRecord& record,
                       const LaunchRequest& request) {
  return follow_elastic_with(p, id, [&](const ElasticOptions& opt) { return follow_elastic(db, id, record, request, opt); });
}

int follow_elastic_slurm_cli(const Parsed& p, const std::filesystem::path& db, store::RunId id,
                             const LaunchRequest& runtime) {
  return follow_elastic_with(p, id, [&](const ElasticOptions& opt) { return follow_elastic_slurm(db, id, runtime, opt); });
}

}  // namespace remote_cli

using namespace remote_cli;

int resume_main(const Args& args) {
  auto p = parse(args,
                 {{"--hosts", "H1,H2", ""}, {"--dry-run", "", ""}, {"--memory-per-rank", "SIZE", ""}, {"--db", "PATH", ""},
                  {"--detach", "", ""}, {"--elastic", "", ""}, {"--max-replans", "N", ""}, {"--lost-after", "SECONDS", ""},
                  {"--meshtrain", "BIN", ""},
                  {"--bundle", "FILE", ""}, {"--bundle-root", "DIR", ""}, {"--node-torch", "DIR", ""}},
                 "meshwork resume");
  if (!p) return refuse(p.error());
  if (p->switches.count("--help") || p->positional.size() != 1) {
    std::cout << "usage: meshwork resume RUN [--hosts H1,H2] [--dry-run] [--memory-per-rank SIZE] [--db PATH]\n"
                 "         [--detach] [--elastic [--max-replans N] [--lost-after SECONDS]]\n"
                 "         [--meshtrain BIN | --bundle FILE ...]\n"
                 "Goes on with a stopped or failed run on the nodes left: re-plans the shape for them (the\n"
                 "planner, with the run's model, sequence length and global batch), prints the old and the\n"
                 "new shape side by side and launches a new segment of the same run from its last complete\n"
                 "checkpoint, then follows it (--detach: not). --hosts: the nodes to resume on (hosts of the\n"
                 "run); default: those that still answer. A Slurm run is resubmitted on the survivors\n"
                 "(--hosts: the Slurm nodes of its last job to keep; default: all but the lost ones, which\n"
                 "sbatch --exclude leaves out). --dry-run: the re-plan only, nothing launched.\n"
                 "--memory-per-rank SIZE: one rank's memory for the re-plan (default: as probed at launch).\n"
                 "--elastic [--max-replans N] [--lost-after SECONDS]: as `meshwork launch --elastic` from\n"
                 "here on.\n"
                 "When no shape fits, the message names what would (more nodes, activation checkpointing)\n"
                 "and nothing is launched. Exit 0: resumed (and, followed, succeeded); 3: nothing fits or\n"
                 "the run failed; 2: invalid input; 1: the nodes or the store failed.\n"
              << kSshHelp;
    if (p->switches.count("--help")) return kExitOk;
    return refuse(Error{"RUN", std::to_string(p->positional.size()) + " given", "name exactly one run (id or name)"});
  }
  auto flags = elastic_flags(*p);
  if (!flags) return refuse(flags.error());
  if (!p->switches.count("--elastic") && p->values.count("--lost-after"))
    return refuse(Error{"--lost-after", p->values.at("--lost-after"), "only with --elastic"});
  if (p->switches.count("--elastic") && p->switches.count("--detach"))
    return refuse(Error{"--elastic", "--detach", "an elastic run is re-planned by the command that follows it: not with --detach"});
  const auto db = db_path(*p);
  auto id = resolve(db, p->positional[0]);
  if (!id) return refuse(id.error());
  {
    auto s = store::RunStore::open(db);
    if (!s) return refuse(s.error());
    auto info = (*s)->get_run(*id);
    if (!info) return refuse(info.error());
    if (info->summary.status == store::kStatusRunning || info->summary.status == store::kStatusCreated)
      return refuse(Error{"RUN", std::to_string(*id) + " (" + info->summary.status + ")",
                          "a run that has ended: stop it first (`meshwork stop " + std::to_string(*id) + "`)"});
  }
  auto rec = load_launch_record(db, *id);
  if (!rec) return refuse(rec.error());
  LaunchRequest req;
  if (auto st = fill_runtime(*p, req); !st) return refuse(st.error());
  auto slurm = load_slurm_info(db, *id);
  if (!slurm) return refuse(slurm.error());
  if (*slurm) return resume_slurm(*p, db, *id, req, *flags);
  const NodeConnector connect = make_connector(*rec, req.ssh);

  std::vector<std::string> keep;
  if (p->values.count("--hosts")) {
    auto given = parse_host_list(p->values.at("--hosts"));
    if (!given) return refuse(given.error());
    std::string run_hosts;
    for (const auto& n : rec->nodes) run_hosts += (run_hosts.empty() ? "" : ", ") + n.host;
    for (const HostEntry& h : *given) {
      const std::string host = h.spec.to_string();
      if (std::none_of(rec->nodes.begin(), rec->nodes.end(), [&](const auto& n) { return n.host == host; }))
        return refuse(Error{"--hosts", host, "a host of the run's last segment: " + run_hosts});
      keep.push_back(host);
    }
  } else {
    keep = reachable_hosts(*rec, connect);
  }
  std::vector<std::string> lost;
  for (const auto& n : rec->nodes)
    if (std::find(keep.begin(), keep.end(), n.host) == keep.end()) lost.push_back(n.host);

  auto plan = plan_resume(ResumeInput{db, *id, lost, flags->memory_per_rank}, connect);
  if (!plan) {
    say_error(plan.error());
    std::cerr << "meshwork: resume: nothing launched\n";
    return exit_code(plan.error().kind);
  }
  std::cout << "run " << *id << ": re-planned for " << plan->replan.run.nodes.size() << " node(s)\n"
            << plan->text() << "\n"
            << std::flush;
  if (p->switches.count("--dry-run")) return kExitOk;
  std::string cause = "resumed by `meshwork resume` on ";
  for (size_t i = 0; i < keep.size(); ++i) cause += (i ? "," : "") + keep[i];
  if (!lost.empty()) {
    cause += " without ";
    for (size_t i = 0; i < lost.size(); ++i) cause += (i ? "," : "") + lost[i];
  }
  auto launched = launch_segment(db, *plan, req, cause);
  if (auto* e = std::get_if<LaunchError>(&launched)) {
    for (size_t i = 1; i < e->more.size(); ++i) say_error(e->more[i]);
    return refuse(e->error);
  }
  const LaunchedRun& run = std::get<LaunchedRun>(launched);
  std::cout << "run " << run.id << ": segment " << run.record.segment << " started on " << run.record.nodes.size()
            << " node(s) in " << run.record.nodes[0].run_dir << "\n"
            << std::flush;
  if (p->switches.count("--detach")) return kExitOk;
  if (p->switches.count("--elastic")) return follow_elastic_cli(*p, db, run.id, run.record, req);
  RunFollower follower(db, run.id, run.record, make_connector(run.record, req.ssh), terminal_follow_options());
  g_follower = &follower;
  detach_on_sigint(true);
  auto outcome = follower.run();
  g_follower = nullptr;
  detach_on_sigint(false);
  return exit_after_follow(outcome, run.id, "run", [&] {
    return outcome && outcome->root_cause ? outcome->root_cause->text() : std::string();
  });
}

}  // namespace meshwork::cli
