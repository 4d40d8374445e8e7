#include "ui/core_bridge.h"

#include <unistd.h>

#include <algorithm>

#include "core/memory_estimate.h"
#include "core/parallel_layout.h"
#include "core/planner.h"
#include "core/time_estimate.h"
#include "core/units.h"

namespace meshwork::ui {

std::vector<int> axis_choices(int world_size) {
  std::vector<int> out;
  for (int d = 1; d <= world_size; ++d)
    if (world_size % d == 0) out.push_back(d);
  return out;
}

std::vector<std::string> model_presets() { return preset_names(); }

Result<ModelSpec> model_of(const RunConfig& config) { return model_spec_from_run_model(config.model); }

namespace {
// Every node's GPUs joined by NVLink (the cluster cards' fast links); unknown counts as fast.
bool all_links_fast(const ClusterFacts& cluster) {
  return std::all_of(cluster.fast_links.begin(), cluster.fast_links.end(), [](bool f) { return f; });
}

// core's hardware model of the cluster's device and links, with the cluster's calibration and
// fit when it has them: how core estimates this cluster's shapes. With `model`, the measured
// routing too when it is that model's (a model changed since it was read never takes it).
EstimateOptions estimate_options(const ClusterFacts& cluster, const ModelSpec* model = nullptr) {
  EstimateOptions o;
  o.hardware = cluster.hardware && cluster.device == DeviceKind::cuda ? *cluster.hardware
                                                                       : HardwareModel::for_device(cluster.device, all_links_fast(cluster));
  if (cluster.calibration) o.calibration = *cluster.calibration;
  o.fit = cluster.fit;  // made on the same base (RunFitModel::fit_for)
  if (model && cluster.routing && cluster.routing->check_matches(*model)) o.routing = cluster.routing;
  return o;
}

// The run's training settings on the cluster's device (the cluster decides where it runs).
RunConfig on_cluster_device(RunConfig config, const ClusterFacts& cluster) {
  config.training.device = cluster.device;
  return config;
}

std::string this_hostname() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "local";
  return host;
}

}  // namespace

ClusterFingerprint cluster_node_set(DeviceKind device, const std::vector<NodeConfig>& nodes) {
  ClusterFingerprint f;
  f.device = device;
  for (const NodeConfig& n : nodes) {
    ClusterFingerprint::Node node;
    node.host = n.host == "local" ? this_hostname() : n.host;
    node.devices = n.slots;
    f.nodes.push_back(std::move(node));
  }
  return f;
}

const store::StoredCalibration* calibration_for_cluster(const std::vector<store::StoredCalibration>& stored,
                                                        DeviceKind device, const std::vector<NodeConfig>& nodes) {
  if (nodes.empty()) return nullptr;
  const ClusterFingerprint ours = cluster_node_set(device, nodes);
  const std::string id = ours.node_set_id();
  for (const store::StoredCalibration& s : stored)
    if (s.calibration.fingerprint.node_set_id() == id) return &s;
  // The same hosts with other rank counts (a CPU node planned with 4 ranks, calibrated with 2).
  auto same_hosts = [&](const ClusterFingerprint& f) {
    if (f.device != device || f.nodes.size() != ours.nodes.size()) return false;
    for (size_t i = 0; i < f.nodes.size(); ++i)
      if (f.nodes[i].host != ours.nodes[i].host) return false;
    return true;
  };
  for (const store::StoredCalibration& s : stored)
    if (same_hosts(s.calibration.fingerprint)) return &s;
  return nullptr;
}

namespace {

// Where a step time's numbers came from, as the memory bar and the planner rows carry it.
struct Basis {
  bool calibration = false;  // a calibration was the base
  bool compute_calibrated = false;
  AxisArray<bool> comm_calibrated{};
  AxisArray<bool> comm_used{};
  bool compute_fitted = false;
  AxisArray<bool> comm_fitted{};
  int fit_runs = 0;
  bool fitted() const {
    if (fit_runs <= 0) return false;
    bool any = compute_fitted;
    for (Axis a : kAxes) any = any || (comm_used[a] && comm_fitted[a]);
    return any;
  }
};

Basis basis_of(const MemoryEstimate& m) {
  AxisArray<bool> used{};
  for (Axis a : kAxes) used[a] = m.time.communicates(a);
  return {!m.calibration_id.empty(), m.time.compute_calibrated, m.time.comm_calibrated, used,
          m.time.compute_fitted,     m.time.comm_fitted,        m.fit_runs};
}
Basis basis_of(const PlanRow& r) {
  const TimeEstimate& t = r.entry.time;
  bool any = t.compute_calibrated;
  for (bool c : t.comm_calibrated) any = any || c;
  AxisArray<bool> used{};
  for (Axis a : kAxes) used[a] = t.communicates(a);
  return {any, t.compute_calibrated, t.comm_calibrated, used, t.compute_fitted, t.comm_fitted, r.fit_runs};
}

std::string runs_text(int n) { return std::to_string(n) + (n == 1 ? " run" : " runs"); }

std::string basis_tag(const Basis& b) {
  std::string cal = "uncalibrated estimate";
  if (b.calibration) {
    bool all = b.compute_calibrated, any = b.compute_calibrated;
    for (Axis a : kAxes) {
      if (!b.comm_used[a]) continue;
      all = all && b.comm_calibrated[a];
      any = any || b.comm_calibrated[a];
    }
    cal = all ? "calibrated" : (any ? "partly calibrated" : "uncalibrated estimate");
  }
  if (!b.fitted()) return cal;
  const std::string fit = "fitted to " + runs_text(b.fit_runs);
  return cal == "uncalibrated estimate" ? fit : cal + " + " + fit;
}

// core's TimeEstimate::step_band in words; without one, that the defaults are unmeasured.
std::string band_sentence(double band, bool measured) {
  if (!(band > 0) && measured) return "";
  if (!(band > 0))
    return std::string(" Uncertainty: not measured on this cluster; core's hardware defaults can miss a step by a factor "
                       "of several. ") + kCalibrateAction + " measures it.";
  return " No prediction is closer than ± " + std::to_string(static_cast<int>(100 * band + 0.5)) +
         " %: the cluster's own step times moved that much while it calibrated (or the fit missed its runs by that);"
         " a shape unlike the calibration's splits can miss by more.";
}

// Why the stored runs were not fitted, when that is why the estimate is not fitted.
std::string fit_refusal_sentence(const std::string& refusal, bool fitted) {
  if (fitted || refusal.empty()) return "";
  return " Not fitted to the stored runs of these nodes: " + refusal + ".";
}

std::string join_words(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : (i + 1 == v.size() ? " and " : ", ")) + v[i];
  return s;
}

}  // namespace

std::string time_basis(const MemoryEstimate& m) { return basis_tag(basis_of(m)); }
std::string time_basis(const PlanRow& r) { return basis_tag(basis_of(r)); }

std::string time_basis_detail(const MemoryEstimate& m) {
  std::string text;
  if (m.calibration_id.empty()) {
    text = "Uncalibrated estimate: no stored calibration of these nodes, so the step time uses core's hardware "
           "defaults (peak FLOP/s x efficiency, link latency and bandwidth).";
  } else {
    std::vector<std::string> measured, defaults;
    (m.time.compute_calibrated ? measured : defaults).push_back("compute");
    for (Axis a : kAxes) {
        if (m.time.communicates(a)) (m.time.comm_calibrated[a] ? measured : defaults).push_back(std::string(axis_name(a)) + " communication");
    }
    text = "Calibration " + m.calibration_id.substr(0, 8) + " of these nodes, measured " + m.calibration_measured_at + ".";
    if (!measured.empty()) text += " From it: " + join_words(measured) + ".";
    if (!defaults.empty()) text += " From core's defaults (not measured for this shape): " + join_words(defaults) + ".";
  }
  const Basis b = basis_of(m);
  text += band_sentence(m.time.step_band, b.calibration || b.fitted());
  text += fit_refusal_sentence(m.fit_refusal, b.fitted());
  if (!b.fitted()) return text;
  std::vector<std::string> fitted, unfitted;
  (m.time.compute_fitted ? fitted : unfitted).push_back("compute");
  for (Axis a : kAxes) {
    if (m.time.communicates(a)) (m.time.comm_fitted[a] ? fitted : unfitted).push_back(std::string(axis_name(a)) + " communication");
  }
  auto percent = [](double f) { return std::to_string(static_cast<int>(f * 100 + 0.5)) + " %"; };
  text += " Fitted to the " + runs_text(m.fit_runs) + " of these nodes in the store (the formulas scaled to what " +
          "they measured; judged on runs it did not learn from, each predicted by the fit of the others: median error " +
          percent(m.fit_median_residual) + ", worst " + percent(m.fit_worst_residual) + "): corrected " +
          join_words(fitted) + ".";
  if (!unfitted.empty()) text += " Not in those runs (not corrected): " + join_words(unfitted) + ".";
  return text;
}

std::string time_basis_detail(const PlanRow& r) {
  const TimeEstimate& t = r.entry.time;
  const bool fitted = basis_of(r).fitted();
  const std::string fit = " × fit of " + runs_text(r.fit_runs);
  std::string text = std::string("compute: ") + (t.compute_calibrated ? "calibration" : "defaults") +
                     (fitted && t.compute_fitted ? fit : "");
  for (Axis a : kAxes) {
    if (!t.communicates(a)) continue;
    text += "; " + std::string(axis_name(a)) + ": " + (t.comm_calibrated[a] ? "calibration" : "defaults") +
            (fitted && t.comm_fitted[a] ? fit : "");
  }
  return text + "." + band_sentence(t.step_band, basis_of(r).calibration || fitted) +
         fit_refusal_sentence(r.fit_refusal, fitted);
}

std::string uncertainty_text(const TimeEstimate& t) {
  if (t.step_band > 0) return "± " + std::to_string(static_cast<int>(100 * t.step_band + 0.5)) + " %";
  return "uncertainty unknown (uncalibrated)";
}

// The placement core checks against. The intra-node link is core's hardware model of the
// cluster's GPUs (NVLink, or PCIe when a card reports no fast link); unknown (CPU ranks) stays 0
// so core raises no slow-link warning it cannot back up.
Placement placement_of(const ClusterFacts& cluster) {
  Placement p;
  p.world_size = cluster.world_size;
  p.ranks_per_node = cluster.ranks_per_node;
  if (cluster.device == DeviceKind::cuda)
    p.links.intra_node_bytes_per_s = estimate_options(cluster).hardware.intra_node_bytes_per_s;
  return p;
}

Result<MeshShape> resolved_shape(const RunConfig& config, const ClusterFacts& cluster) {
  return resolve_shape(config.mesh, cluster.world_size);
}

std::vector<Diagnostic> validate(const RunConfig& config, const ClusterFacts& cluster) {
  auto model = model_of(config);
  std::vector<Diagnostic> out;
  if (!model) {
    const Error& e = model.error();
    out.push_back({Severity::error, e.field, e.value, e.allowed});
  }
  const LayoutCheck checked = ParallelLayout::check(config, model ? &*model : nullptr, placement_of(cluster));
  out.insert(out.end(), checked.report.diagnostics.begin(), checked.report.diagnostics.end());
  if (checked.ok() && !checked.layout->accelerate_refusal().empty())
    out.push_back({Severity::warning, "mesh", checked.layout->shape().compact(), checked.layout->accelerate_refusal()});
  if (!cluster.oversubscription.empty())
    out.push_back({Severity::warning, "cluster", std::to_string(cluster.ranks_per_node) + " ranks per node",
                   cluster.oversubscription});
  return out;
}

Result<MemoryEstimate> estimate_memory(const RunConfig& config, const ClusterFacts& cluster) {
  auto model = model_of(config);
  if (!model) return model.error();
  const LayoutCheck checked = ParallelLayout::check(on_cluster_device(config, cluster), &*model, placement_of(cluster));
  if (!checked.ok()) return checked.report.first_error();
  const ParallelLayout& layout = *checked.layout;
  const EstimateOptions options = estimate_options(cluster, &*model);

  MemoryEstimate out;
  out.memory = meshwork::worst_stage_memory(layout, *model, options);
  out.time = meshwork::estimate_time(layout, *model, options);
  out.stages = layout.size(Axis::pp);
  if (cluster.calibration) {
    out.calibration_id = cluster.calibration->fingerprint.id();
    out.calibration_measured_at = cluster.calibration->measured_at;
  }
  bool fitted = out.time.compute_fitted;
  for (Axis a : kAxes) fitted = fitted || out.time.comm_fitted[a];
  if (cluster.fit && fitted) {
    out.fit_runs = cluster.fit->runs;
    out.fit_median_residual = cluster.fit->median_residual;
    out.fit_worst_residual = cluster.fit->worst_residual;
  }
  out.fit_refusal = cluster.fit_refusal;
  const meshwork::MemoryBreakdown& m = out.memory;
  const double total = double(m.total());
  out.capacity_bytes = cluster.device_memory_bytes;
  out.fits = cluster.device_memory_bytes <= 0 || m.fits(int64_t(cluster.device_memory_bytes));
  // The part named when it does not fit: the largest one, i.e. the one worth shrinking first.
  const std::vector<meshwork::MemoryTerm> parts = m.peak_terms();
  const auto largest = std::max_element(parts.begin(), parts.end(),
                                        [](auto& a, auto& b) { return a.bytes < b.bytes; });
  if (!out.fits) {
    out.breaking_term = largest->name;
    out.verdict = "over by " + meshwork::format_bytes(total - out.capacity_bytes) +
                  "; the largest term is " + largest->name + " (" +
                  meshwork::format_bytes(double(largest->bytes)) + ")";
  } else if (out.capacity_bytes > 0) {
    out.verdict = meshwork::format_bytes(out.capacity_bytes - total) + " headroom · " +
                  std::string(meshwork::to_string(m.attention)) + " attention · " +
                  std::to_string(m.fsdp_shards) + "-way sharded optimizer state";
  }
  return out;
}

namespace {
// Why no shape of the cluster's rank count is valid, in the user's terms: when the global batch is
// the reason (every shape is refused, but with a batch each shape can take some are valid), say
// so and name a batch that works; else core's first refusal. Then what core says of the shape in
// the editor, with its tp, so the note never speaks only of a shape the user is not using.
Error no_valid_shape(PlanQuery q, const RunConfig& config, const ClusterFacts& cluster, const Error& refusal) {
  const int world = q.nodes * q.gpus_per_node;
  const int global_batch = q.training.global_batch, micro = std::max(1, q.training.micro_batch);
  std::string note = "no shape of " + std::to_string(world) + (world == 1 ? " rank" : " ranks") + " is valid";
  q.training.global_batch = 0;  // each shape takes micro_batch x its data-parallel size
  auto any_batch = global_batch > 0 ? meshwork::make_plan(q) : Result<Plan>(refusal);
  if (any_batch && !any_batch->shapes.empty()) {
    // The smallest batch >= the user's that some otherwise valid shape takes.
    int suggestion = 0;
    for (const PlanEntry& e : any_batch->shapes) {
      const int step = micro * e.shape[Axis::dp_replicate] * e.shape[Axis::dp_shard];
      const int fit = (global_batch + step - 1) / step * step;
      if (suggestion == 0 || fit < suggestion) suggestion = fit;
    }
    size_t taking = 0;
    for (const PlanEntry& e : any_batch->shapes)
      taking += suggestion % (micro * e.shape[Axis::dp_replicate] * e.shape[Axis::dp_shard]) == 0;
    note += " with global batch " + std::to_string(global_batch) + ": the global batch is why. Each shape needs a "
            "multiple of micro batch " + std::to_string(micro) + " × its data-parallel size (dp_replicate × dp_shard); "
            "global batch " + std::to_string(suggestion) + " lets " + std::to_string(taking) +
            (taking == 1 ? " shape run" : " shapes run");
  } else {
    note += ": " + refusal.message();
  }
  std::string shape;
  for (Axis a : kAxes) {
    const int size = config.mesh[a];
    shape += (shape.empty() ? "" : " ") + std::string(axis_name(a)) + " " + (size < 1 ? std::string("auto") : std::to_string(size));
  }
  note += ". The editor's shape (" + shape + ")";
  std::string editor_error;
  for (const Diagnostic& d : validate(config, cluster))
    if (is_error(d)) {
      editor_error = d.text();
      break;
    }
  note += editor_error.empty() ? " is valid on its own" : ": " + editor_error;
  return Error{"planner", "", note};
}
}  // namespace

Result<std::vector<PlanRow>> plan_shapes(const RunConfig& config, const ClusterFacts& cluster) {
  auto model = model_of(config);
  if (!model) return model.error();
  meshwork::PlanQuery q;
  q.model = *model;
  q.training = on_cluster_device(config, cluster).training;
  q.nodes = cluster.num_nodes;
  q.gpus_per_node = cluster.ranks_per_node;
  q.device_memory_bytes = static_cast<int64_t>(cluster.device_memory_bytes);
  q.estimate = estimate_options(cluster, &*model);
  // Stages follow the editor: the planner keeps its pp (1 by default; the ranked shapes then
  // have that many stages) and enumerates pp too when it is auto, judging pipelined shapes with
  // the run's schedule.
  const int pp = config.mesh[Axis::pp];
  q.fixed.set(Axis::pp, pp < 1 ? 0 : pp);
  auto plan = meshwork::make_plan(q);
  // core's words for "every shape was refused" (core/planner.cpp); other errors (the model, the
  // memory) are not about shapes and go as they are.
  if (!plan && plan.error().message().find("no shape with the fixed axes is valid") != std::string::npos)
    return no_valid_shape(q, config, cluster, plan.error());
  if (!plan) return plan.error();
  std::vector<PlanRow> rows;
  for (meshwork::PlanEntry& e : plan->shapes) {
    PlanRow r;
    bool fitted = e.time.compute_fitted;
    for (Axis a : kAxes) fitted = fitted || e.time.comm_fitted[a];
    if (cluster.fit && fitted) r.fit_runs = cluster.fit->runs;
    r.fit_refusal = cluster.fit_refusal;
    if (!cluster.oversubscription.empty()) r.note = "cluster: " + cluster.oversubscription;
    for (const Diagnostic& w : e.warnings) r.note += (r.note.empty() ? "" : "\n") + w.text();
    if (!e.accelerate_refusal.empty()) r.note += (r.note.empty() ? "" : "\n") + e.accelerate_refusal;
    r.entry = std::move(e);
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace meshwork::ui
