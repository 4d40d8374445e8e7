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
// core's hardware defaults for the device, with the intra-node link the cluster cards report.
meshwork::HardwareModel hardware_for(const ClusterFacts& cluster) {
  meshwork::HardwareModel h = meshwork::HardwareModel::for_device(cluster.device);
  if (cluster.device == DeviceKind::cuda)
    for (bool fast : cluster.fast_links)
      if (!fast) h.intra_node_bytes_per_s = 32e9;  // PCIe Gen4 x16 (the slow-link rule, below)
  return h;
}

// The time query of `layout` with the cluster's calibration, when it has one.
meshwork::TimeQuery time_query_of(const ParallelLayout& layout, const ModelSpec& model, const ClusterFacts& cluster) {
  meshwork::TimeQuery q = layout.time_query(model, hardware_for(cluster));
  if (cluster.calibration) q.calibration = *cluster.calibration;
  q.fit = cluster.fit;  // made on the same base (RunFitModel::fit_for)
  return q;
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

Basis basis_of(const MemoryBreakdown& m) {
  return {!m.calibration_id.empty(), m.compute_calibrated, m.comm_calibrated, m.comm_used,
          m.compute_fitted,          m.comm_fitted,        m.fit_runs};
}
Basis basis_of(const PlanRow& r) {
  bool any = r.compute_calibrated;
  for (bool c : r.comm_calibrated) any = any || c;
  return {any, r.compute_calibrated, r.comm_calibrated, r.comm_used, r.compute_fitted, r.comm_fitted, r.fit_runs};
}

std::string runs_text(int n) { return std::to_string(n) + (n == 1 ? " run" : " runs"); }

std::string basis_tag(const Basis& b) {
  std::string cal = "defaults";
  if (b.calibration) {
    bool all = b.compute_calibrated, any = b.compute_calibrated;
    for (Axis a : kAxes) {
      if (!b.comm_used[a]) continue;
      all = all && b.comm_calibrated[a];
      any = any || b.comm_calibrated[a];
    }
    cal = all ? "calibrated" : (any ? "partly calibrated" : "defaults");
  }
  if (!b.fitted()) return cal;
  const std::string fit = "fitted to " + runs_text(b.fit_runs);
  return cal == "defaults" ? fit : cal + " + " + fit;
}

// core's TimeEstimate::step_band in words ("" when unknown).
std::string band_sentence(double band) {
  if (!(band > 0)) return "";
  return " No prediction is closer than ± " + std::to_string(static_cast<int>(100 * band + 0.5)) +
         " %: the cluster's own step times moved that much while it calibrated (or the fit missed its runs by that);"
         " a shape unlike the calibration's splits can miss by more.";
}

std::string join_words(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : (i + 1 == v.size() ? " and " : ", ")) + v[i];
  return s;
}

}  // namespace

std::string time_basis(const MemoryBreakdown& m) { return basis_tag(basis_of(m)); }
std::string time_basis(const PlanRow& r) { return basis_tag(basis_of(r)); }

std::string time_basis_detail(const MemoryBreakdown& m) {
  std::string text;
  if (m.calibration_id.empty()) {
    text = "No stored calibration of these nodes: the step time uses core's hardware defaults "
           "(peak FLOP/s x efficiency, link latency and bandwidth). Cluster > Calibrate measures them.";
  } else {
    std::vector<std::string> measured, defaults;
    (m.compute_calibrated ? measured : defaults).push_back("compute");
    for (Axis a : kAxes) {
        if (m.comm_used[a]) (m.comm_calibrated[a] ? measured : defaults).push_back(std::string(axis_name(a)) + " communication");
    }
    text = "Calibration " + m.calibration_id.substr(0, 8) + " of these nodes, measured " + m.calibration_measured_at + ".";
    if (!measured.empty()) text += " From it: " + join_words(measured) + ".";
    if (!defaults.empty()) text += " From core's defaults (not measured for this shape): " + join_words(defaults) + ".";
  }
  text += band_sentence(m.step_band);
  const Basis b = basis_of(m);
  if (!b.fitted()) return text;
  std::vector<std::string> fitted, unfitted;
  (m.compute_fitted ? fitted : unfitted).push_back("compute");
  for (Axis a : kAxes) {
    if (m.comm_used[a]) (m.comm_fitted[a] ? fitted : unfitted).push_back(std::string(axis_name(a)) + " communication");
  }
  auto percent = [](double f) { return std::to_string(static_cast<int>(f * 100 + 0.5)) + " %"; };
  text += " Fitted to the " + runs_text(m.fit_runs) + " of these nodes in the store (the formulas scaled to what " +
          "they measured; median error " + percent(m.fit_median_residual) + ", worst " +
          percent(m.fit_worst_residual) + "): corrected " + join_words(fitted) + ".";
  if (!unfitted.empty()) text += " Not in those runs (not corrected): " + join_words(unfitted) + ".";
  return text;
}

std::string time_basis_detail(const PlanRow& r) {
  const Basis b = basis_of(r);
  const bool fitted = b.fitted();
  const std::string fit = " × fit of " + runs_text(r.fit_runs);
  std::string text = std::string("compute: ") + (r.compute_calibrated ? "calibration" : "defaults") +
                     (fitted && r.compute_fitted ? fit : "");
  for (Axis a : kAxes) {
    if (!r.comm_used[a]) continue;
    text += "; " + std::string(axis_name(a)) + ": " + (r.comm_calibrated[a] ? "calibration" : "defaults") +
            (fitted && r.comm_fitted[a] ? fit : "");
  }
  return text + "." + band_sentence(r.step_band);
}

// The placement core checks against. Link speeds are what the cluster cards show: NVLink-joined
// GPUs count as fast, PCIe-only boxes as PCIe Gen4 x16 (~32 GB/s); unknown (CPU ranks, unprobed
// nodes) stays 0 so core raises no slow-link warning it cannot back up.
Placement placement_of(const ClusterFacts& cluster) {
  Placement p;
  p.world_size = cluster.world_size;
  p.ranks_per_node = cluster.ranks_per_node;
  if (cluster.device == DeviceKind::cuda) {
    bool all_fast = true;
    for (bool f : cluster.fast_links) all_fast = all_fast && f;
    p.links.intra_node_bytes_per_s = all_fast ? 450e9 : 32e9;
  }
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
  return out;
}

Result<MemoryBreakdown> estimate_memory(const RunConfig& config, const ClusterFacts& cluster) {
  auto model = model_of(config);
  if (!model) return model.error();
  const LayoutCheck checked = ParallelLayout::check(config, &*model, placement_of(cluster));
  if (!checked.ok()) return checked.report.first_error();
  const ParallelLayout& layout = *checked.layout;
  const meshwork::MemoryQuery q = layout.memory_query(*model, cluster.device);
  const meshwork::MemoryBreakdown m = meshwork::worst_stage_memory(q);

  // The bar shows the phase that sets the peak (core: total = max(backward, step) + reserve), so
  // its segments add up to core's total.
  MemoryBreakdown out;
  out.terms = {{"params", double(m.params)}, {"grads", double(m.grads)}, {"optimizer", double(m.optimizer)}};
  if (m.backward_phase() >= m.step_phase()) {
    out.terms.push_back({"activations", double(m.activations_total())});
    out.terms.push_back({"buffers", double(m.buffers())});
  } else {
    out.terms.push_back({"step temporaries", double(m.optimizer_step_temp)});
  }
  out.terms.push_back({"reserve", double(m.reserve)});
  out.total_bytes = double(m.total());
  out.stages = layout.size(Axis::pp);
  out.worst_stage = m.pp_stage;
  out.stage_layers = static_cast<int>(m.stage_layers);
  const meshwork::TimeEstimate t = meshwork::estimate_time(time_query_of(layout, *model, cluster));
  out.pp_bubble_fraction = t.pp_bubble_fraction;
  out.tokens_per_s = t.tokens_per_s;
  out.mfu = t.mfu;
  out.step_seconds = t.step_s;
  out.step_band = t.step_band;
  out.compute_calibrated = t.compute_calibrated;
  out.compute_fitted = t.compute_fitted;
  bool fitted = t.compute_fitted;
  for (Axis a : kAxes) {
    out.comm_calibrated[a] = t.comm_calibrated[a];
    out.comm_used[a] = t.comm[a].collectives > 0 || t.comm[a].seconds > 0;
    out.comm_fitted[a] = t.comm_fitted[a];
    fitted = fitted || t.comm_fitted[a];
  }
  if (cluster.calibration) {
    out.calibration_id = cluster.calibration->fingerprint.id();
    out.calibration_measured_at = cluster.calibration->measured_at;
  }
  if (cluster.fit && fitted) {
    out.fit_runs = cluster.fit->runs;
    out.fit_median_residual = cluster.fit->median_residual;
    out.fit_worst_residual = cluster.fit->worst_residual;
  }
  out.capacity_bytes = cluster.device_memory_bytes;
  out.fits = cluster.device_memory_bytes <= 0 || m.fits(int64_t(cluster.device_memory_bytes));
  // The term named when it does not fit: the largest one, i.e. the one worth shrinking first.
  const auto largest = std::max_element(out.terms.begin(), out.terms.end(),
                                        [](auto& a, auto& b) { return a.bytes < b.bytes; });
  if (!out.fits) {
    out.breaking_term = largest->name;
    out.verdict = "over by " + meshwork::format_bytes(out.total_bytes - out.capacity_bytes) +
                  "; the largest term is " + largest->name + " (" +
                  meshwork::format_bytes(largest->bytes) + ")";
  } else if (out.capacity_bytes > 0) {
    out.verdict = meshwork::format_bytes(out.capacity_bytes - out.total_bytes) + " headroom · " +
                  std::string(meshwork::to_string(m.attention)) + " attention · " +
                  std::to_string(m.fsdp_shards) + "-way sharded optimizer state";
  }
  return out;
}

Result<std::vector<PlanRow>> plan_shapes(const RunConfig& config, const ClusterFacts& cluster) {
  auto model = model_of(config);
  if (!model) return model.error();
  meshwork::PlanQuery q;
  q.model = *model;
  q.nodes = cluster.num_nodes;
  q.gpus_per_node = cluster.ranks_per_node;
  q.device_memory_bytes = static_cast<int64_t>(cluster.device_memory_bytes);
  q.seq_len = config.training.seq_len;
  q.micro_batch = config.training.micro_batch;
  q.global_batch = config.training.global_batch;
  q.precision = config.training.precision;
  q.activation_checkpointing = config.training.activation_checkpointing;
  q.device = cluster.device;
  q.hardware = hardware_for(cluster);
  if (cluster.calibration) q.calibration = *cluster.calibration;
  q.fit = cluster.fit;  // made on the same base (RunFitModel::fit_for)
  // Stages follow the editor: the planner keeps its pp (1 by default; the ranked shapes then
  // have that many stages) and enumerates pp too when it is auto, judging pipelined shapes with
  // the run's schedule.
  const int pp = config.mesh[Axis::pp];
  q.fixed.set(Axis::pp, pp < 1 ? 0 : pp);
  q.pp_schedule = config.training.pp_schedule;
  q.pp_virtual_stages = config.training.pp_virtual_stages;
  auto plan = meshwork::make_plan(q);
  if (!plan) return plan.error();
  std::vector<PlanRow> rows;
  for (const meshwork::PlanEntry& e : plan->shapes) {
    PlanRow r;
    r.shape = e.shape;
    r.fits = e.fits;
    r.memory_bytes = double(e.memory.total());
    r.tokens_per_s = e.time.tokens_per_s;
    r.mfu = e.time.mfu;
    r.step_seconds = e.time.step_s;
    r.step_band = e.time.step_band;
    for (Axis a : kAxes)
      r.comm_share[a] = e.time.step_s > 0 ? e.time.comm[a].seconds / e.time.step_s : 0;
    r.compute_calibrated = e.time.compute_calibrated;
    r.comm_calibrated = e.time.comm_calibrated;
    r.compute_fitted = e.time.compute_fitted;
    r.comm_fitted = e.time.comm_fitted;
    bool fitted = e.time.compute_fitted;
    for (Axis a : kAxes) {
      r.comm_used[a] = e.time.comm[a].collectives > 0 || e.time.comm[a].seconds > 0;
      fitted = fitted || e.time.comm_fitted[a];
    }
    if (cluster.fit && fitted) r.fit_runs = cluster.fit->runs;
    r.accelerate_refusal = e.accelerate_refusal;
    for (const Diagnostic& w : e.warnings) r.note += (r.note.empty() ? "" : "\n") + w.text();
    if (!e.accelerate_refusal.empty()) r.note += (r.note.empty() ? "" : "\n") + e.accelerate_refusal;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace meshwork::ui
