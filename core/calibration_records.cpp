#include "core/calibration_records.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "core/time_estimate.h"

namespace meshwork {

namespace {

template <class T>
bool field(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return false;
  } else {
    if (!it->is_number()) return false;
  }
  out = it->get<T>();
  return true;
}

}  // namespace

CalibrationSamples samples_from_records(const std::vector<CalibrationRecord>& records,
                                        const std::vector<std::string>& hosts) {
  CalibrationSamples out;
  std::map<int, ClusterFingerprint::Node> nodes;
  std::map<std::tuple<int, int, int, double>, CollectiveSample> slowest;
  std::map<std::string, size_t> split_index;
  auto skip = [&](const CalibrationRecord& r, const std::string& why) {
    out.errors.push_back("calibration record of rank " + std::to_string(r.rank) + ": kind " + r.kind + ": " + why);
  };
  for (const CalibrationRecord& r : records) {
    out.last_time = std::max(out.last_time, r.time);
    const nlohmann::json& f = r.fields;
    if (r.kind == "node") {
      int node = 0;
      ClusterFingerprint::Node n;
      if (!field(f, "node", node) || !field(f, "host", n.host) || !field(f, "ranks_per_node", n.devices)) {
        skip(r, "needs node, host and ranks_per_node");
        continue;
      }
      field(f, "cores", n.cores);
      field(f, "device_name", n.device_name);
      nodes[node] = n;
    } else if (r.kind == "matmul") {
      MatmulSample s;
      std::string precision;
      if (!field(f, "precision", precision) || !field(f, "m", s.m) || !field(f, "n", s.n) ||
          !field(f, "k", s.k) || !field(f, "seconds", s.seconds) || !field(f, "threads", s.threads) ||
          !field(f, "ranks_per_node", s.ranks_per_node)) {
        skip(r, "needs precision, m, n, k, seconds, threads and ranks_per_node");
        continue;
      }
      field(f, "count", s.count);
      field(f, "split", s.split);
      field(f, "experts_ep", s.experts_ep);
      auto p = parse_precision(precision);
      // What the calibration file allows too (a fuzz find: split 0 was fitted, then refused when
      // read back).
      if (!p || !(s.seconds > 0) || !std::isfinite(s.seconds) || s.m < 1 || s.n < 1 || s.k < 1 || s.threads < 1 ||
          s.ranks_per_node < 1 || s.split < 1 || s.count < 1 || s.experts_ep < 0) {
        skip(r, "precision fp32|bf16, seconds > 0, m, n, k, threads, ranks_per_node, count, split >= 1 and "
                "experts_ep >= 0");
        continue;
      }
      s.precision = *p;
      out.matmuls.push_back(s);
    } else if (r.kind == "collective") {
      CollectiveSample s;
      std::string op, link;
      if (!field(f, "op", op) || !field(f, "link", link) || !field(f, "group_size", s.group_size) ||
          !field(f, "bytes", s.bytes) || !field(f, "seconds", s.seconds)) {
        skip(r, "needs op, link, group_size, bytes and seconds");
        continue;
      }
      auto o = parse_collective(op);
      auto l = parse_link_kind(link);
      if (!o || !l || !(s.seconds > 0) || !std::isfinite(s.seconds) || !(s.bytes > 0) || !(s.bytes < 1e18) ||
          s.group_size < 2) {
        skip(r, "op, link as documented, group_size >= 2, seconds > 0 and bytes from 1 to 1e18");
        continue;
      }
      s.op = *o;
      s.link = *l;
      auto key = std::make_tuple(static_cast<int>(s.op), static_cast<int>(s.link), s.group_size, s.bytes);
      auto [it, fresh] = slowest.emplace(key, s);
      if (!fresh) it->second.seconds = std::max(it->second.seconds, s.seconds);
    } else if (r.kind == "step") {
      StepSample s;
      std::string precision;
      if (!field(f, "precision", precision) || !field(f, "ranks_per_node", s.ranks_per_node) ||
          !field(f, "flops", s.flops) || !field(f, "seconds", s.seconds)) {
        skip(r, "needs precision, ranks_per_node, flops and seconds");
        continue;
      }
      auto p = parse_precision(precision);
      if (!p || !(s.seconds > 0) || !(s.flops > 0) || !std::isfinite(s.flops) || !std::isfinite(s.seconds) ||
          s.ranks_per_node < 1) {
        skip(r, "precision fp32|bf16, flops > 0, seconds > 0 and ranks_per_node >= 1");
        continue;
      }
      field(f, "expert_flops", s.expert_flops);
      if (!std::isfinite(s.expert_flops) || s.expert_flops < 0 || s.expert_flops >= s.flops) {
        skip(r, "expert_flops >= 0 and below flops");
        continue;
      }
      s.precision = *p;
      out.steps.push_back(s);
    } else if (r.kind == "split_step") {
      auto config = f.contains("config") ? run_config_from_json(f["config"]) : Result<RunConfig>(Error{"config", "(missing)", "a run config"});
      SplitStepSample s;
      if (!config) {
        skip(r, "config: " + config.error().message());
        continue;
      }
      s.config = *config;
      if (!field(f, "world", s.world) || !field(f, "ranks_per_node", s.ranks_per_node) ||
          !field(f, "compute_s", s.measured.compute_s) || !f.contains("comm_s") || !f["comm_s"].is_object()) {
        skip(r, "needs config, world, ranks_per_node, compute_s and comm_s");
        continue;
      }
      // A placement that can exist: the nodes' ranks make the world (a fuzz find: 137,727,366
      // ranks per node on a world of 4 took seconds to estimate).
      bool ok = s.world >= 1 && s.world <= kMaxCalibrationWorld && s.ranks_per_node >= 1 &&
                s.ranks_per_node <= s.world && s.world % s.ranks_per_node == 0 &&
                std::isfinite(s.measured.compute_s) && s.measured.compute_s >= 0;
      for (Axis a : kAxes) {
        double v = 0;
        const auto it = f["comm_s"].find(std::string(axis_name(a)));
        if (it != f["comm_s"].end()) {
          if (!it->is_number()) ok = false;
          else v = it->get<double>();
        }
        ok = ok && std::isfinite(v) && v >= 0;
        s.measured.comm_s[a] = v;
      }
      if (const auto it = f["comm_s"].find("ep"); it != f["comm_s"].end()) {
        ok = ok && it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() >= 0;
        if (ok) s.measured.comm_ep_s = it->get<double>();
      }
      if (!ok) {
        skip(r, "world from 1 to " + std::to_string(kMaxCalibrationWorld) +
                    " and a multiple of ranks_per_node >= 1, compute_s and each comm_s a finite number >= 0");
        continue;
      }
      // Optional (calibrations before the drift check have neither): a finite spread >= 0, and an
      // again_step_s > 0 beside the first measurement > 0: first_step_s where the split was timed
      // in two passes (step_s is then both together, never a stand-in for a first_step_s that is
      // not a number), step_s where the drift check measured it again after one pass.
      double spread = 0, step_s = 0, again_s = 0;
      if (field(f, "spread", spread) && std::isfinite(spread) && spread >= 0) s.spread = spread;
      const char* first_key = f.contains("first_step_s") ? "first_step_s" : "step_s";
      if (field(f, "again_step_s", again_s) && field(f, first_key, step_s) && std::isfinite(again_s) &&
          std::isfinite(step_s) && again_s > 0 && step_s > 0) {
        s.drift = again_s / step_s - 1;
        s.drift_ranks = 1;
      }
      s.ranks = 1;
      // Every rank of the split reports: the run's step is their mean, as a stored run's is.
      const std::string key = f["config"].dump();
      auto it = split_index.find(key);
      if (it == split_index.end()) {
        split_index.emplace(key, out.split_steps.size());
        out.split_steps.push_back(std::move(s));
      } else {
        SplitStepSample& acc = out.split_steps[it->second];
        const double n = acc.ranks;
        acc.measured.compute_s = (acc.measured.compute_s * n + s.measured.compute_s) / (n + 1);
        for (Axis a : kAxes) acc.measured.comm_s[a] = (acc.measured.comm_s[a] * n + s.measured.comm_s[a]) / (n + 1);
        acc.measured.comm_ep_s = (acc.measured.comm_ep_s * n + s.measured.comm_ep_s) / (n + 1);
        acc.spread = (acc.spread * n + s.spread) / (n + 1);
        if (s.drift_ranks > 0) {
          const double d = acc.drift_ranks;
          acc.drift = (acc.drift * d + s.drift) / (d + 1);
          acc.drift_ranks += 1;
        }
        acc.ranks += 1;
      }
    } else {
      skip(r, "unknown kind (allowed: node, matmul, collective, step, split_step)");
    }
  }
  bool all_cpu = !nodes.empty();
  for (auto& [index, n] : nodes) {
    if (static_cast<size_t>(index) < hosts.size() && !hosts[index].empty()) n.host = hosts[index];
    all_cpu = all_cpu && n.device_name == "cpu";
    out.fingerprint.nodes.push_back(n);
  }
  out.fingerprint.device = all_cpu ? DeviceKind::cpu : DeviceKind::cuda;
  out.fingerprint.links = {"intra_node"};
  if (out.fingerprint.nodes.size() > 1) out.fingerprint.links.push_back("inter_node");
  for (const auto& [key, s] : slowest) out.collectives.push_back(s);
  return out;
}

std::vector<int64_t> split_step_micro_batches(const RunConfig& run, const MeshShape& split) {
  const int64_t per_step = run.training.micro_batch * split.group_size(GroupKind::dp);
  int64_t accumulated = 2;
  if (run.training.global_batch > 0 && per_step > 0 && run.training.global_batch % per_step == 0)
    accumulated = std::clamp<int64_t>(run.training.global_batch / per_step, 2, kMaxSplitStepMicroBatches);
  return {1, accumulated};
}

std::vector<MeshShape> split_step_shapes(int world, int ranks_per_node, int num_experts) {
  std::vector<MeshShape> shapes;
  const int per_node = std::max(1, ranks_per_node);
  if (world < 1) return shapes;
  // Inside a node (d dividing R) and, on several nodes, across two of them (d = 2R, or the world
  // when smaller): a group that crosses nodes is its own condition (inter-node keys), and groups
  // larger than that take the same link's factors (core/fit_key.h).
  auto with_ep = [](MeshShape s, int ep) {
    s.ep = ep;
    return s;
  };
  for (int d = 1; d <= std::min(world, 2 * per_node); ++d) {
    if (world % d || (d <= per_node ? per_node % d : d % per_node)) continue;
    // A mixture of experts whose experts d ranks can share out (ep = d).
    const bool ep_over_d = d > 1 && num_experts > 0 && num_experts % d == 0;
    for (int tp = 1; tp <= d; ++tp)
      if (d % tp == 0) shapes.push_back(MeshShape{world / d, 1, d / tp, tp});
    // Each tp x cp split again with ep = d, its experts over the split's ranks. The compute of a
    // shape with both tp/cp and ep is its own condition: it is neither the dense split's (the
    // experts run on ep x the rows) nor the FSDP split's with the same ep (attention runs tp- or
    // cp-narrow), and predicting it from either was far off (docs/estimator.md, "Split steps").
    // Inside a node only: across two, these are the calibration's longest steps (tp and ring
    // attention over the world at the run's whole accumulation), and a compute factor is a
    // property of the split more than of the link; a wider split takes its tp x cp's factors.
    if (ep_over_d && d <= per_node)
      for (int tp = 1; tp <= d; ++tp)
        if (d % tp == 0) shapes.push_back(with_ep(MeshShape{world / d, 1, d / tp, tp}, d));
    if (d > 1) shapes.push_back(MeshShape{world / d, d, 1, 1});
    if (ep_over_d) shapes.push_back(with_ep(MeshShape{world / d, d, 1, 1}, d));
    // And with ep = d / 2, which leaves the experts FSDP-sharded over pairs (efsdp 2) in
    // collectives of their own: the expert_fsdp term's factor (core/fit_key.h).
    if (d >= 4 && d % 2 == 0 && num_experts > 0 && num_experts % (d / 2) == 0)
      shapes.push_back(with_ep(MeshShape{world / d, d, 1, 1}, d / 2));
    // Across nodes, FSDP with tp inside the node as well: every tp group then has its own FSDP
    // group over the link, all at once, the way a cluster's shapes put them; one FSDP group alone
    // does not share the link, and predicting the shared case from it is far off
    // (docs/estimator.md, "Split steps").
    if (d > per_node)
      for (int tp = 2; tp <= per_node; ++tp)
        if (per_node % tp == 0) shapes.push_back(MeshShape{world / d, d / tp, 1, tp});
  }
  return shapes;
}

std::vector<RunObservation> split_step_observations(const std::vector<SplitStepSample>& samples) {
  std::vector<RunObservation> out;
  for (const SplitStepSample& s : samples) {
    auto spec = model_spec_from_run_model(s.config.model);
    if (!spec) continue;
    Placement placement = Placement::of(s.config);
    placement.world_size = s.world;
    placement.ranks_per_node = s.ranks_per_node;
    LayoutCheck checked = ParallelLayout::check(s.config, &*spec, placement);
    if (!checked.ok()) continue;
    auto query = std::make_shared<const TimeQuery>(
        checked.layout->time_query(*spec, HardwareModel::for_device(s.config.training.device)));
    RunObservation o;
    o.name = "split " + s.config.mesh.to_string();
    o.query = query;
    o.measured = s.measured;
    o.measured.steps = 1;
    out.push_back(std::move(o));
  }
  return out;
}

void read_calibration_records(std::istream& jsonl, std::vector<CalibrationRecord>& out) {
  std::string line;
  while (std::getline(jsonl, line)) {
    auto rec = parse_metrics_line(line);
    if (rec.ok() && std::holds_alternative<CalibrationRecord>(*rec)) out.push_back(std::get<CalibrationRecord>(*rec));
  }
}

Result<Calibration> calibration_from_records(const std::vector<CalibrationRecord>& records,
                                             const std::vector<std::string>& hosts) {
  CalibrationSamples s = samples_from_records(records, hosts);
  if (s.fingerprint.nodes.empty())
    return Error{"calibration", std::to_string(records.size()) + " records",
                 "at least one \"node\" record (the run did not start on any node)"};
  auto cal = build_calibration(s.fingerprint, s.matmuls, s.collectives, iso_utc(s.last_time));
  if (!cal) return cal;
  std::vector<double> efficiency;
  for (const StepSample& st : s.steps) {
    std::optional<double> rate = cal->matmul_flops(st.precision, st.ranks_per_node, 1);
    if (!rate || !(*rate > 0)) continue;
    // A mixture of experts: the expert blocks' share at their own calibrated rate (ep 1: the
    // step ran one process), the efficiency of the rest (attention, norms, embedding and loss).
    double flops = st.flops, seconds = st.seconds;
    if (st.expert_flops > 0)
      if (std::optional<double> er = cal->expert_flops(st.precision, st.ranks_per_node, 1, 1); er && *er > 0) {
        flops -= st.expert_flops;
        seconds -= st.expert_flops / *er;
      }
    if (flops > 0 && seconds > 0) efficiency.push_back(std::min(1.0, flops / seconds / *rate));
  }
  if (!efficiency.empty()) cal->step_efficiency = median(efficiency);
  std::vector<double> spreads;
  for (const SplitStepSample& st : s.split_steps) {
    if (st.spread > 0) spreads.push_back(st.spread);
    if (st.drift_ranks > 0) cal->step_drift = std::max(cal->step_drift, std::abs(st.drift));
  }
  if (!spreads.empty()) cal->step_spread = median(spreads);
  // Steps that ran more than kMaxStepNoise times slower (or faster) the second time were not
  // measured on a machine of its own: refused here, before anything stores what no reader would
  // take (calibration_from_json keeps the same bound).
  for (auto [name, value] : {std::pair<const char*, double>{"step_noise.drift", cal->step_drift},
                             {"step_noise.spread", cal->step_spread}})
    if (value > kMaxStepNoise)
      return Error{name, std::to_string(value),
                   "at most " + std::to_string(static_cast<int>(kMaxStepNoise)) +
                       ": the same split step changed that much while the nodes calibrated (something else was "
                       "running on them); calibrate again when they are quiet"}
          .as(ErrorKind::does_not_fit);
  if (!s.split_steps.empty()) {
    auto fit = fit_runs(split_step_observations(s.split_steps), *cal);
    if (fit)
      for (const FitFactor& f : fit->factors)
        if (f.factor > 0 && std::isfinite(f.factor)) cal->step_factors.push_back(f);
  }
  return cal;
}

}  // namespace meshwork
