#include "core/store/run_observations.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/cluster_source.h"
#include "core/parallel_layout.h"
#include "core/store/compare_frame.h"

namespace meshwork::store {

namespace {

std::string run_label(RunId run, const RunSummary& s) {
  return "run " + std::to_string(run) + (s.name.empty() ? "" : " '" + s.name + "'");
}

}  // namespace

Result<ClusterFingerprint> run_node_set(RunStore* store, RunId run, const RunInfo& info) {
  auto ranks = store->ranks(run);
  if (!ranks) return ranks.error();
  ClusterFingerprint f;
  const nlohmann::json& training = info.config.value("training", nlohmann::json::object());
  if (training.is_object() && training.contains("device") && training["device"].is_string()) {
    auto d = parse_device(training["device"].get<std::string>(), "training.device");
    if (!d) return d.error();
    f.device = *d;
  }
  // Node by node: the host its first rank reported and the ranks it ran (counted, not assumed).
  std::map<int, ClusterFingerprint::Node> nodes;
  std::map<int, int> per_node;
  for (const RankInfo& r : *ranks) {
    ClusterFingerprint::Node& n = nodes[r.node];
    if (n.host.empty()) n.host = r.host;
    ++per_node[r.node];
  }
  // A run launched over SSH names its nodes as the launcher reached them (the SSH host), which
  // is what a calibration through the same launcher records; "local" is this machine, and a
  // Slurm job's nodes (the launcher reached only the login node) are known by their own names.
  nlohmann::json launched;
  if (!is_slurm(stored_cluster_source(info.config, info.cluster)) && info.cluster.is_object() &&
      info.cluster.contains("launch") && info.cluster["launch"].is_object())
    launched = info.cluster["launch"].value("nodes", nlohmann::json());
  for (auto& [node, n] : nodes) {
    n.devices = per_node[node];
    if (launched.is_array() && node >= 0 && static_cast<size_t>(node) < launched.size() &&
        launched[static_cast<size_t>(node)].is_object()) {
      const nlohmann::json& h = launched[static_cast<size_t>(node)].value("host", nlohmann::json());
      if (h.is_string() && !h.get<std::string>().empty() && h.get<std::string>() != "local") n.host = h.get<std::string>();
    }
    f.nodes.push_back(n);
  }
  return f;
}

Result<RunObservation> load_observation(RunStore* store, RunId run) {
  auto info = store->get_run(run);
  if (!info) return info.error();
  const RunSummary& s = info->summary;
  const std::string label = run_label(run, s);
  if (s.status != kStatusOk)
    return Error{label, s.status.empty() ? "running" : s.status,
                 "predicted and measured are compared once a run has finished ok"};
  if (s.steps < 1)
    return Error{label, std::to_string(s.steps + 1) + " step(s)", "at least 2 steps (the first is warm-up)"};
  auto config = run_config_from_json(info->config);
  if (!config) return Error{label, config.error().message(), "a run config core can read"};
  auto spec = model_spec_from_run_model(config->model);
  if (!spec) return Error{label, spec.error().message(), "a model core can read"};
  auto nodes = run_node_set(store, run, *info);
  if (!nodes) return nodes.error();

  // Where the ranks ran, as stored; a run that stored no ranks: its config's own placement.
  Placement placement = Placement::of(*config);
  if (!nodes->nodes.empty()) {
    int64_t world = 0;
    int per_node = 0;
    for (const auto& n : nodes->nodes) {
      world += n.devices;
      per_node = std::max(per_node, n.devices);
    }
    placement.world_size = world;
    placement.ranks_per_node = per_node;
  }
  LayoutCheck checked = ParallelLayout::check(*config, &*spec, placement);
  if (!checked.ok()) {
    const auto texts = checked.error_texts();
    return Error{label, texts.empty() ? "mesh" : texts.front(), "a shape core accepts"};
  }
  auto query = std::make_shared<const TimeQuery>(
      checked.layout->time_query(*spec, HardwareModel::for_device(config->training.device)));

  // Mean per step, the first (warm-up: allocations, lazy initialisation) left out.
  std::vector<CommStats> stats;
  if (Status st = comm_means(store, {run}, 1, s.steps, stats); !st) return st.error();
  const CommStats& c = stats.front();
  const double compute = c.mean[kAxisCount];
  if (std::isnan(compute))
    return Error{label, "no compute_s", "a run that recorded compute_s and comm_s per axis (meshtrain's metrics)"};
  RunObservation o;
  o.run = run;
  o.name = label;
  o.query = query;
  o.measured.compute_s = compute;
  for (Axis a : kAxes) {
    const double mean = c.mean[axis_index(a)];  // CommMeans: kAxes order, then compute
    o.measured.comm_s[a] = std::isnan(mean) ? 0.0 : mean;
  }
  o.measured.comm_ep_s = std::isnan(c.ep_mean) ? 0.0 : c.ep_mean;  // the ep term's equation
  o.measured.steps = c.sampled_steps;
  return o;
}

Result<ObservationSet> load_observations(RunStore* store, const std::string& node_set_id, int limit,
                                         std::optional<RunId> exclude) {
  auto runs = store->list_runs();  // newest first
  if (!runs) return runs.error();
  std::map<std::string, ObservationSet> by_cluster;
  for (const RunSummary& s : *runs) {
    if (exclude && s.id == *exclude) continue;
    if (s.status != kStatusOk) continue;  // running, failed or stopped: not a step time to learn
    auto info = store->get_run(s.id);
    if (!info) return info.error();
    auto nodes = run_node_set(store, s.id, *info);
    if (!nodes) continue;
    const std::string id = nodes->node_set_id();
    if (!node_set_id.empty() && id != node_set_id) continue;
    ObservationSet& set = by_cluster[id];
    set.cluster = id;
    if (static_cast<int>(set.runs.size()) >= limit) continue;
    auto o = load_observation(store, s.id);
    if (!o) {
      set.skipped.push_back(o.error().message());
      continue;
    }
    set.runs.push_back(std::move(*o));
  }
  if (!node_set_id.empty()) {
    auto it = by_cluster.find(node_set_id);
    if (it != by_cluster.end()) return it->second;
    ObservationSet empty;
    empty.cluster = node_set_id;
    return empty;
  }
  ObservationSet best;
  for (auto& [id, set] : by_cluster)
    if (set.runs.size() > best.runs.size()) best = set;
  return best;
}

Result<StoredRunFit> fit_stored_runs(RunStore* store, const std::string& node_set_id,
                                     const std::optional<Calibration>& base) {
  auto set = load_observations(store, node_set_id);
  if (!set) return set.error();
  StoredRunFit out;
  out.cluster = set->cluster;
  out.skipped = std::move(set->skipped);
  out.stored_runs = static_cast<int>(set->runs.size());
  if (set->runs.empty()) return out;
  auto fit = fit_runs_out_of_sample(set->runs, base);
  if (!fit) {
    out.refusal = fit.error().value + ": " + fit.error().allowed;
    return out;
  }
  fit->cluster = set->cluster;
  out.fit = std::make_shared<const RunFit>(std::move(*fit));
  return out;
}

Result<std::optional<Calibration>> calibration_for_node_set(RunStore* store, const std::string& node_set_id) {
  auto all = list_calibrations(*store);
  if (!all) return all.error();
  for (const StoredCalibration& c : *all)  // newest first
    if (c.calibration.fingerprint.node_set_id() == node_set_id) return std::optional<Calibration>(c.calibration);
  return std::optional<Calibration>();
}

std::string RunPrediction::basis() const {
  std::string b = calibrated ? "calibration" : "defaults";
  if (fitted_runs > 0) b += " + fit of " + std::to_string(fitted_runs) + " run" + (fitted_runs == 1 ? "" : "s");
  return b;
}

Result<RunPrediction> predict_run(RunStore* store, RunId run) {
  auto o = load_observation(store, run);
  if (!o) return o.error();
  auto info = store->get_run(run);
  if (!info) return info.error();
  auto nodes = run_node_set(store, run, *info);
  if (!nodes) return nodes.error();
  const std::string cluster = nodes->node_set_id();
  auto cal = calibration_for_node_set(store, cluster);
  if (!cal) return cal.error();
  // The run's own measurement stays out of what predicts it: the prediction is the one the
  // planner would have made before the run, from the cluster's other runs.
  constexpr int kFitRuns = 64;
  auto others = load_observations(store, cluster, kFitRuns, run);
  if (!others) return others.error();

  RunPrediction p;
  TimeQuery q = *o->query;
  q.calibration = *cal;
  p.calibrated = cal->has_value();
  if (!others->runs.empty()) {
    auto fit = fit_runs(others->runs, *cal);
    if (fit) {
      fit->cluster = cluster;
      p.fitted_runs = fit->runs;
      q.fit = std::make_shared<const RunFit>(std::move(*fit));
    }
  }
  p.predicted = estimate_time(q);
  p.measured = o->measured;
  p.check = check_prediction(p.predicted, p.measured);
  return p;
}

}  // namespace meshwork::store
