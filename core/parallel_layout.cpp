#include "core/parallel_layout.h"

namespace meshwork {

Placement Placement::of(const RunConfig& config) {
  Placement p;
  p.world_size = config.world_size();
  p.ranks_per_node = config.nodes.empty() ? static_cast<int>(p.world_size) : config.nodes.front().slots;
  return p;
}

std::vector<std::string> LayoutCheck::error_texts() const {
  std::vector<std::string> out;
  for (const Diagnostic& d : report.errors()) out.push_back(d.text());
  return out;
}

LayoutCheck ParallelLayout::check(const RunConfig& config, const ModelSpec* model, const Placement& placement,
                                  const TrainerSupport& support) {
  // The one place a ShapeQuery is made: everything the rules look at, from the config and the
  // placement.
  ShapeQuery q;
  q.shape = config.mesh;
  q.world_size = placement.world_size;
  q.gpus_per_node = placement.ranks_per_node;
  if (model) q.model = *model;
  q.seq_len = config.training.seq_len;
  q.global_batch = config.training.global_batch;
  q.micro_batch = config.training.micro_batch;
  q.vocab_parallel = support.vocab_parallel;
  q.links = placement.links;
  q.allow_tp_cp_with_pure_replication = support.tp_cp_with_pure_replication;
  q.pp_schedule = config.training.pp_schedule;
  q.pp_virtual_stages = config.training.pp_virtual_stages;

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

MemoryQuery ParallelLayout::memory_query(const ModelSpec& model, DeviceKind device) const {
  MemoryQuery q;
  q.model = model;
  q.shape = shape();
  q.seq_len = training_.seq_len;
  q.micro_batch = training_.micro_batch;
  q.precision = training_.precision;
  q.activation_checkpointing = training_.activation_checkpointing;
  q.device = device;
  q.grad_accum_steps = grad_accum_steps_;
  q.knobs.sequence_parallel = training_.sequence_parallel;
  q.knobs.vocab_parallel = support_.vocab_parallel;
  q.knobs.fsdp_reduce_once_per_step = training_.fsdp_grad_sync == FsdpGradSync::step;
  q.pp_schedule = training_.pp_schedule;
  q.pp_virtual_stages = training_.pp_virtual_stages;
  return q;
}

TimeQuery ParallelLayout::time_query(const ModelSpec& model, const HardwareModel& hardware) const {
  TimeQuery q;
  q.model = model;
  q.shape = shape();
  q.gpus_per_node = ranks_per_node();
  q.seq_len = training_.seq_len;
  q.micro_batch = training_.micro_batch;
  q.global_batch = training_.global_batch;
  q.precision = training_.precision;
  q.activation_checkpointing = training_.activation_checkpointing;
  q.hardware = hardware;
  q.sequence_parallel = training_.sequence_parallel;
  q.vocab_parallel = support_.vocab_parallel;
  q.fsdp_reduce_once_per_step = training_.fsdp_grad_sync == FsdpGradSync::step;
  q.pp_schedule = training_.pp_schedule;
  q.pp_virtual_stages = training_.pp_virtual_stages;
  return q;
}

}  // namespace meshwork
