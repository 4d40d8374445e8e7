#include "core/parallel_layout.h"

namespace meshwork {

std::vector<std::string> LayoutCheck::error_texts() const {
  std::vector<std::string> out;
  for (const Diagnostic& d : report.errors()) out.push_back(d.text());
  return out;
}

LayoutCheck ParallelLayout::check(const RunConfig& config, const ModelSpec* model, const Placement& placement,
                                  const TrainerSupport& support) {
  // The one place a ShapeQuery is made: the config's shape and training settings, the model,
  // the placement and the trainer.
  ShapeQuery q;
  q.shape = config.mesh;
  q.placement = placement;
  if (model) q.model = *model;
  q.training = config.training;
  q.trainer = support;

  LayoutCheck out;
  out.report = validate_shape(q);
  if (!out.report.ok()) return out;
  const int per_node = placement.ranks_per_node > 0 ? placement.ranks_per_node
                                                     : static_cast<int>(placement.world_size);
  auto mesh = DeviceMesh::create(out.report.shape, per_node);
  if (!mesh.ok()) {
    out.report.diagnostics.push_back({Severity::error, mesh.error().field, mesh.error().value, mesh.error().allowed});
    return out;
  }
  ParallelLayout layout(std::move(*mesh), config.training);
  layout.support_ = support;
  layout.grad_accum_steps_ = out.report.grad_accum_steps > 0 ? out.report.grad_accum_steps : 1;
  layout.kv_replicated_ = out.report.kv_replicated;
  layout.accelerate_refusal_ = out.report.accelerate_refusal;
  layout.warnings_ = out.report.warnings();
  out.layout = std::move(layout);
  return out;
}

int64_t ParallelLayout::seq_len_divisor() const { return meshwork::seq_len_divisor(shape()); }

int64_t ParallelLayout::tokens_per_replica_step() const {
  return int64_t{training_.global_batch} * training_.seq_len / dp_size();
}

MemoryQuery ParallelLayout::memory_query(const ModelSpec& model, const MemoryModel& knobs) const {
  MemoryQuery q;
  q.model = model;
  q.shape = shape();
  q.training = training_;
  q.trainer = support_;
  q.knobs = knobs;
  return q;
}

TimeQuery ParallelLayout::time_query(const ModelSpec& model, const EstimateOptions& options) const {
  TimeQuery q;
  q.model = model;
  q.shape = shape();
  q.gpus_per_node = ranks_per_node();
  q.training = training_;
  q.trainer = support_;
  q.hardware = options.hardware;
  q.calibration = options.calibration;
  q.fit = options.fit;
  q.moe_imbalance = options.routing ? options.routing->step_imbalance(shape().ep) : options.memory.moe_imbalance;
  // An ep group wider than a node holds ranks_per_node consecutive ep ranks, so consecutive
  // expert blocks, on each of its ep / ranks_per_node nodes (core/mesh.h).
  const int ep = shape().ep, per_node = std::max(1, ranks_per_node());
  const int ep_nodes = ep > per_node && ep % per_node == 0 ? ep / per_node : ep;
  q.moe_node_imbalance = options.routing ? options.routing->step_imbalance(ep_nodes) : options.memory.moe_imbalance;
  return q;
}

TimeQuery ParallelLayout::time_query(const ModelSpec& model, const HardwareModel& hardware) const {
  EstimateOptions options;
  options.hardware = hardware;
  return time_query(model, options);
}

MemoryBreakdown worst_stage_memory(const ParallelLayout& layout, const ModelSpec& model, const EstimateOptions& options) {
  MemoryModel knobs = options.memory;
  if (options.routing) knobs.moe_imbalance = options.routing->memory_imbalance(layout.shape().ep);
  return worst_stage_memory(layout.memory_query(model, knobs));
}

TimeEstimate estimate_time(const ParallelLayout& layout, const ModelSpec& model, const EstimateOptions& options) {
  return estimate_time(layout.time_query(model, options));
}

}  // namespace meshwork
