#include "remote/elastic.h"

#include <algorithm>
#include <array>
#include <iomanip>
#include <sstream>
#include <thread>

#include "core/exit_record.h"
#include "core/shell_quote.h"
#include "core/units.h"
#include "remote/parse_util.h"
#include "remote/probe_parsers.h"

namespace meshwork::remote {

using namespace detail;

namespace {

template <class F>
void each_node(size_t n, F&& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
  for (auto& t : threads) t.join();
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

std::vector<LostNode> find_lost_nodes(const LaunchRecord& rec, const NodeConnector& connect) {
  std::vector<std::optional<LostNode>> found(rec.nodes.size());
  each_node(rec.nodes.size(), [&](size_t i) {
    const std::string host = rec.nodes[i].host;
    auto conn = connect(i);
    if (auto* e = std::get_if<ConnectError>(&conn)) {
      found[i] = LostNode{i, host, "unreachable: " + e->error.message()};
      return;
    }
    Node& node = *std::get<0>(conn);
    const std::string record = exit_record_file(static_cast<int>(i));
    auto text = node.read_range(rec.nodes[i].run_dir + "/" + record, 0, 1);
    if (!text) {
      found[i] = LostNode{i, host, "its run directory cannot be read: " + text.error().message()};
    } else if (!text->has_value()) {
      found[i] = LostNode{i, host, "its supervisor and ranks were killed (no exit record " + record + ")"};
    }
  });
  std::vector<LostNode> out;
  for (auto& f : found)
    if (f) out.push_back(std::move(*f));
  return out;
}

std::vector<std::string> reachable_hosts(const LaunchRecord& rec, const NodeConnector& connect) {
  std::vector<bool> ok(rec.nodes.size(), false);
  each_node(rec.nodes.size(), [&](size_t i) { ok[i] = !std::holds_alternative<ConnectError>(connect(i)); });
  std::vector<std::string> out;
  for (size_t i = 0; i < ok.size(); ++i)
    if (ok[i]) out.push_back(rec.nodes[i].host);
  return out;
}

std::string checkpoint_dir_of(const LaunchRecord& rec) {
  if (!rec.checkpoint_dir.empty()) return rec.checkpoint_dir;
  return rec.nodes.empty() ? std::string() : rec.nodes[0].run_dir + "/checkpoints";
}

Result<int64_t> last_complete_checkpoint(Node& node, const std::string& dir) {
  auto r = node.exec("cd -- " + shell_quote(dir) +
                         " 2>/dev/null || exit 0; for d in step-*; do [ -e \"$d/COMPLETE\" ] && echo \"$d\"; done; :",
                     std::chrono::seconds(30));
  if (!r) return r.error();
  if (r->exit_code != 0) return Error{"checkpoint directory", dir, "a directory that can be listed: " + r->err};
  int64_t last = 0;
  for (const std::string& line : split_lines(r->out)) {
    const std::string_view name = trim(line);
    if (name.rfind("step-", 0) != 0) continue;
    if (auto step = to_int(name.substr(5))) last = std::max<int64_t>(last, *step);
  }
  return last;
}

int64_t memory_per_rank(const nlohmann::json& cluster, int slots, int64_t given) {
  if (given > 0) return given;
  int64_t gpu = 0, host = 0;
  for (const auto& p : cluster.value("probes", nlohmann::json::array())) {
    if (!p.is_object()) continue;
    const auto gpus = p.value("gpus", nlohmann::json::array());
    for (const auto& g : gpus) {
      const int64_t bytes = g.value("memory_total_mib", int64_t{0}) << 20;
      if (bytes > 0) gpu = gpu == 0 ? bytes : std::min(gpu, bytes);
    }
    const int64_t mem = p.value("mem_total_bytes", int64_t{0}) / std::max(1, slots);
    if (mem > 0) host = host == 0 ? mem : std::min(host, mem);
  }
  return gpu > 0 ? gpu : host;
}

std::string ResumePlan::text() const {
  const RunConfig& now = replan.run;
  std::vector<std::string> old_hosts, new_hosts;
  for (const auto& n : record.nodes) old_hosts.push_back(n.host);
  for (const auto& n : now.nodes) new_hosts.push_back(n.host);
  if (!old_nodes.empty()) old_hosts = {old_nodes};
  if (!new_nodes.empty()) new_hosts = {new_nodes};
  std::vector<std::array<std::string, 3>> rows = {{"", "before", "re-planned"}};
  for (Axis a : kAxes)
    rows.push_back({std::string(axis_name(a)), std::to_string(replan.old_shape[a]), std::to_string(replan.new_shape[a])});
  rows.push_back({"ranks", std::to_string(replan.old_shape.world_size()), std::to_string(replan.new_shape.world_size())});
  rows.push_back({"nodes", join(old_hosts, ","), join(new_hosts, ",")});
  size_t w0 = 0, w1 = 0;
  for (const auto& r : rows) {
    w0 = std::max(w0, r[0].size());
    w1 = std::max(w1, r[1].size());
  }
  std::ostringstream out;
  for (const auto& r : rows)
    out << "  " << std::left << std::setw(static_cast<int>(w0) + 2) << r[0] << std::setw(static_cast<int>(w1) + 4)
        << r[1] << r[2] << "\n";
  out << "  " << replan.reason << "\n";
  if (checkpoint_step > 0) {
    out << "  from the checkpoint of step " << checkpoint_step << " in " << checkpoint_dir << ": training goes on at step "
        << checkpoint_step + 1;
  } else {
    out << "  no complete checkpoint in " << checkpoint_dir << ": training starts again at step 1";
  }
  return out.str();
}

Result<ResumePlan> plan_resume(const ResumeInput& in, const NodeConnector& connect) {
  auto store = store::RunStore::open(in.db);
  if (!store) return store.error();
  auto info = (*store)->get_run(in.run);
  if (!info) return info.error();
  if (!info->cluster.contains("launch"))
    return Error{"RUN", std::to_string(in.run), "a run launched by meshwork (it has no launch record)"};
  auto rec = launch_record_from_json(info->cluster.at("launch"));
  if (!rec) return rec.error();
  // The current segment's own config (its nodes and shape), else the run as launched.
  auto config = run_config_from_json(info->cluster.contains("segment_config") ? info->cluster.at("segment_config")
                                                                               : info->config);
  if (!config) return config.error();
  // A Slurm job's config names its nodes by index (Slurm picked the hosts); its record names the
  // login node for each. An SSH run's hosts are the record's.
  if (!info->cluster.contains("slurm")) {
    config->nodes.clear();
    for (const auto& n : rec->nodes) config->nodes.push_back(NodeConfig{n.host, n.slots, {}});
  }

  ResumePlan plan;
  plan.run = in.run;
  plan.record = *rec;
  plan.checkpoint_dir = checkpoint_dir_of(*rec);
  plan.memory_per_rank = memory_per_rank(info->cluster, rec->nodes.front().slots, in.memory_per_rank);
  if (plan.memory_per_rank <= 0)
    return Error{"--memory-per-rank", "", "give one rank's memory (the launch probed none)"};
  ReplanInput replan;
  replan.run = *config;
  replan.lost_hosts = in.lost_hosts;
  replan.device_memory_bytes = plan.memory_per_rank;
  replan.estimate.hardware = HardwareModel::for_device(config->training.device);
  auto r = replan_for_survivors(replan);
  if (!r) return r.error();
  plan.replan = *r;

  // The checkpoint, as a survivor sees it (the directory must be one every node reaches).
  size_t survivor = rec->nodes.size();
  for (size_t i = 0; i < rec->nodes.size() && survivor == rec->nodes.size(); ++i)
    if (std::find(in.lost_hosts.begin(), in.lost_hosts.end(), rec->nodes[i].host) == in.lost_hosts.end()) survivor = i;
  if (survivor == rec->nodes.size()) return Error{"--hosts", "", "at least one node of the run"};
  auto conn = connect(survivor);
  if (auto* e = std::get_if<ConnectError>(&conn)) return e->error.as(ErrorKind::remote);
  auto step = last_complete_checkpoint(*std::get<0>(conn), plan.checkpoint_dir);
  if (!step) return step.error().as(ErrorKind::remote);
  plan.checkpoint_step = *step;
  return plan;
}

void make_segment_request(LaunchRequest& base, const ResumePlan& plan, const std::string& cause) {
  base.config = plan.replan.run;
  // The new segment's run directory beside the last one's (its root), on the same filesystem.
  base.remote_root = std::filesystem::path(plan.record.nodes.front().run_dir).parent_path().string();
  base.master_addr.clear();
  base.master_port = 0;
  base.max_restarts = plan.record.max_restarts;
  base.subcommand = plan.record.subcommand;
  base.segment_of = SegmentOf{plan.run, plan.checkpoint_dir, plan.checkpoint_step + 1, cause};
}

std::variant<LaunchedRun, LaunchError> launch_segment(const std::filesystem::path& db, const ResumePlan& plan,
                                                      LaunchRequest base, const std::string& cause) {
  make_segment_request(base, plan, cause);
  return launch_run(db, base);
}

Result<std::optional<ResumePlan>> replan_after_loss(const std::filesystem::path& db, store::RunId run,
                                                    const std::vector<LostNode>& lost, const NodeConnector& connect,
                                                    const ElasticOptions& opt, ElasticOutcome& out, std::string& cause) {
  auto notice = [&](const std::string& level, const std::string& text) {
    if (opt.on_notice) opt.on_notice(level, text);
  };
  auto remember = [&](const std::string& level, const std::string& text) {
    if (auto s = store::RunStore::open(db); s.ok()) (void)(*s)->add_event(run, level, text);
  };
  if (lost.empty()) {
    notice("error", "elastic: no node was lost (a rank failed on a node that is still there): nothing to re-plan");
    return std::optional<ResumePlan>();
  }
  std::vector<std::string> causes, hosts;
  for (const LostNode& l : lost) {
    causes.push_back("node " + std::to_string(l.index) + " (" + l.host + ") lost: " + l.why);
    hosts.push_back(l.host);
  }
  cause = join(causes, "; ");
  notice("error", cause);
  if (out.replans >= opt.max_replans) {
    const std::string text = "elastic: " + std::to_string(out.replans) + " re-plan(s) done, --max-replans " +
                             std::to_string(opt.max_replans) + " reached: the run stays failed";
    notice("error", text);
    remember("error", text);
    return std::optional<ResumePlan>();
  }
  auto plan = plan_resume(ResumeInput{db, run, hosts, opt.memory_per_rank}, connect);
  if (!plan) {
    notice("error", "elastic: nothing relaunched: " + plan.error().message());
    remember("error", "re-plan: nothing relaunched: " + plan.error().message());
    out.refused = plan.error();
    return std::optional<ResumePlan>();
  }
  return std::optional<ResumePlan>(std::move(*plan));
}

Result<ElasticOutcome> follow_elastic(const std::filesystem::path& db, store::RunId run, LaunchRecord rec,
                                      const LaunchRequest& base, const ElasticOptions& opt) {
  auto notice = [&](const std::string& level, const std::string& text) {
    if (opt.on_notice) opt.on_notice(level, text);
  };
  ElasticOutcome out;
  while (true) {
    const NodeConnector connect = make_connector(rec, base.ssh);
    FollowOptions follow = opt.follow;
    follow.lost_after = opt.lost_after;
    RunFollower follower(db, run, rec, connect, follow);
    if (opt.on_follower) opt.on_follower(&follower);
    auto followed = follower.run();
    if (opt.on_follower) opt.on_follower(nullptr);
    if (!followed) return followed.error();
    out.last = *followed;
    if (followed->state != FollowOutcome::State::failed) return out;

    std::string cause;
    auto plan = replan_after_loss(db, run, find_lost_nodes(rec, connect), connect, opt, out, cause);
    if (!plan) return plan.error();
    if (!*plan) return out;
    // The shapes on the first line too: the workbench's status bar shows only that one.
    notice("warning", "elastic: re-planned for the survivors (" + (*plan)->replan.old_shape.compact() + " -> " +
                          (*plan)->replan.new_shape.compact() + "), resuming at once:\n" + (*plan)->text());
    auto launched = launch_segment(db, **plan, base, cause);
    if (auto* e = std::get_if<LaunchError>(&launched)) return e->error;
    rec = std::get<LaunchedRun>(launched).record;
    ++out.replans;
    notice("info", "elastic: segment " + std::to_string(rec.segment) + " started on " +
                       std::to_string(rec.nodes.size()) + " node(s) in " + rec.nodes.front().run_dir);
  }
}

}  // namespace meshwork::remote
