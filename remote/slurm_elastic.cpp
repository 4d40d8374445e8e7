#include "remote/slurm_elastic.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/shell_quote.h"
#include "remote/parse_util.h"
#include "remote/run_control.h"
#include "remote/run_layout.h"

namespace meshwork::remote {

using namespace detail;

namespace {

constexpr const char* kExclude = "--exclude=";

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The segment's run config as stored: its own when it is a resumed segment, else the run's.
Result<RunConfig> current_config(const store::RunInfo& info) {
  return run_config_from_json(info.cluster.contains("segment_config") ? info.cluster.at("segment_config")
                                                                      : info.config);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= s.size()) {
    const size_t comma = std::min(s.find(',', from), s.size());
    if (comma > from) out.push_back(s.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

}  // namespace

Result<SlurmLoss> find_lost_slurm_nodes(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh) {
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  auto info = (*store)->get_run(run);
  if (!info) return info.error();
  auto config = current_config(*info);
  if (!config) return config.error();
  auto rec = load_launch_record(db, run);
  if (!rec) return rec.error();
  const NodeConnector connect = make_connector(*rec, ssh);
  // Every job node's files are in the shared run directory, read through the login node.
  auto conn = connect(0);
  if (auto* e = std::get_if<ConnectError>(&conn)) return e->error.as(ErrorKind::remote);
  Node& login = *std::get<0>(conn);

  const size_t n = rec->nodes.size();
  SlurmLoss loss;
  loss.job_nodes.assign(n, "");
  for (size_t i = 0; i < n; ++i)
    loss.node_names.push_back(i < config->nodes.size() ? config->nodes[i].host : std::to_string(i));
  for (size_t i = 0; i < n; ++i) {
    auto host = login.read_range(rec->nodes[i].run_dir + "/" + node_file(static_cast<int>(i), ".host"), 0, 512);
    if (host && host->has_value()) {
      const auto w = words(**host);
      if (!w.empty()) loss.job_nodes[i] = w[0];
    }
  }
  std::map<size_t, std::string> why;
  for (const LostNode& l : find_lost_nodes(*rec, connect)) why[l.index] = l.why;

  // Slurm's own view of the job's nodes: one it holds out of service is lost whatever the files say.
  std::vector<std::string> names;
  for (const std::string& s : loss.job_nodes)
    if (!s.empty() && std::find(names.begin(), names.end(), s) == names.end()) names.push_back(s);
  if (!names.empty()) {
    auto r = login.exec("scontrol show node " + shell_quote(join(names, ",")), std::chrono::seconds(30), {});
    if (r && r->exit_code == 0) {
      for (const SlurmNodeState& node : parse_scontrol_nodes(r->out)) {
        if (!node.lost()) continue;
        const std::string slurm_says =
            "Slurm reports it " + node.state + (node.reason.empty() ? "" : " (" + node.reason + ")");
        for (size_t i = 0; i < n; ++i)
          if (loss.job_nodes[i] == node.name) why[i] = why.count(i) ? why[i] + "; " + slurm_says : slurm_says;
      }
    }
  }
  for (const auto& [i, text] : why) {
    const std::string& name = loss.node_names[i];
    const std::string where = loss.job_nodes[i].empty() ? "" : "on Slurm node " + loss.job_nodes[i] + ": ";
    loss.lost.push_back(LostNode{i, name, where + text});
    if (!loss.job_nodes[i].empty()) loss.exclude.push_back(loss.job_nodes[i]);
  }
  return loss;
}

Result<SlurmLaunchRequest> stored_slurm_request(const std::filesystem::path& db, store::RunId run,
                                                const LaunchRequest& runtime) {
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  auto info = (*store)->get_run(run);
  if (!info) return info.error();
  if (!info->cluster.contains("slurm") || !info->cluster.at("slurm").is_object())
    return Error{"RUN", std::to_string(run), "a run launched on Slurm"};
  const nlohmann::json& slurm = info->cluster.at("slurm");
  const nlohmann::json o = slurm.value("options", nlohmann::json::object());
  SlurmLaunchRequest req;
  req.login = slurm.value("login", std::string("local"));
  req.job.partition = o.value("partition", std::string());
  req.job.nodes = o.value("nodes", 1);
  req.job.gpus_per_node = o.value("gpus_per_node", 0);
  req.job.nproc_per_node = o.value("nproc_per_node", 0);
  req.job.account = o.value("account", std::string());
  req.job.qos = o.value("qos", std::string());
  req.job.time = o.value("time", std::string());
  req.job.sbatch_args = o.value("sbatch_args", std::vector<std::string>());
  req.base = runtime;
  return req;
}

void name_slurm_nodes(ResumePlan& plan, const SlurmLoss& loss) {
  std::vector<std::string> known;
  for (const std::string& s : loss.job_nodes)
    if (!s.empty()) known.push_back(s);
  if (!known.empty()) plan.old_nodes = join(known, ",");
  const size_t kept = plan.replan.run.nodes.size();
  plan.new_nodes = std::to_string(kept) + (kept == 1 ? " node" : " nodes") +
                   (loss.exclude.empty() ? std::string(" (Slurm picks)") : ", not " + join(loss.exclude, ","));
}

std::variant<LaunchedRun, LaunchError> launch_slurm_segment(const std::filesystem::path& db, const ResumePlan& plan,
                                                            SlurmLaunchRequest job,
                                                            const std::vector<std::string>& exclude,
                                                            const std::string& cause) {
  // One --exclude with every node left out so far: a node lost in an earlier segment stays out.
  std::set<std::string> out(exclude.begin(), exclude.end());
  std::vector<std::string> args;
  for (const std::string& a : job.job.sbatch_args) {
    if (a.rfind(kExclude, 0) == 0) {
      for (const std::string& name : split_commas(a.substr(std::string(kExclude).size()))) out.insert(name);
    } else {
      args.push_back(a);
    }
  }
  if (!out.empty()) args.push_back(kExclude + join(std::vector<std::string>(out.begin(), out.end()), ","));
  job.job.sbatch_args = args;
  job.job.nodes = static_cast<int>(plan.replan.run.nodes.size());
  job.job.nproc_per_node = plan.replan.run.nodes.empty() ? job.job.nproc_per_node : plan.replan.run.nodes[0].slots;
  make_segment_request(job.base, plan, cause);
  return launch_slurm_run(db, job);
}

Result<ElasticOutcome> follow_elastic_slurm(const std::filesystem::path& db, store::RunId run,
                                            const LaunchRequest& runtime, const ElasticOptions& opt) {
  auto notice = [&](const std::string& level, const std::string& text) {
    if (opt.on_notice) opt.on_notice(level, text);
  };
  ElasticOutcome out;
  while (true) {
    auto followed = follow_slurm_run(db, run, runtime.ssh, opt.follow, opt.on_follower);
    if (!followed) return followed.error();
    out.last = *followed;
    if (followed->state != FollowOutcome::State::failed) return out;

    auto loss = find_lost_slurm_nodes(db, run, runtime.ssh);
    if (!loss) return loss.error();
    auto rec = load_launch_record(db, run);
    if (!rec) return rec.error();
    std::string cause;
    auto plan = replan_after_loss(db, run, loss->lost, make_connector(*rec, runtime.ssh), opt, out, cause);
    if (!plan) return plan.error();
    if (!*plan) return out;
    name_slurm_nodes(**plan, *loss);
    notice("warning", "elastic: re-planned for the survivors (" + (*plan)->replan.old_shape.compact() + " -> " +
                          (*plan)->replan.new_shape.compact() + "), resubmitting at once:\n" + (*plan)->text());
    auto job = stored_slurm_request(db, run, runtime);
    if (!job) return job.error();
    auto launched = launch_slurm_segment(db, **plan, *job, loss->exclude, cause);
    if (auto* e = std::get_if<LaunchError>(&launched)) return e->error;
    const LaunchRecord& next = std::get<LaunchedRun>(launched).record;
    ++out.replans;
    auto slurm = load_slurm_info(db, run);
    notice("info", "elastic: segment " + std::to_string(next.segment) + " submitted as Slurm job " +
                       (slurm && *slurm ? (*slurm)->job_id : std::string("?")) + " on " + (*plan)->new_nodes +
                       ", in " + next.nodes.front().run_dir);
  }
}

}  // namespace meshwork::remote
