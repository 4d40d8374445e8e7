// The parallel layout of a run: one validated value that the workbench, `meshwork plan`, the
// launcher and meshtrain all ask, and nothing else (the role torchtitan's ParallelDims plays).
//
// It is made once, by ParallelLayout::check(), from
//   - the run config (mesh, model, its TrainingConfig: sequence length, batches, the trainer
//     knobs; the layout keeps that TrainingConfig and hands it to the estimators' queries),
//   - the placement: how many ranks, how many per node, how fast the links are,
//   - what the trainer that will run it supports (TrainerSupport; Meshwork plans for meshtrain),
// and it holds the resolved shape, the DeviceMesh over the nodes and every size derived from
// them. Every shape rule is applied once, in core/validation.cpp, under one rule set; a shape
// that Accelerate would refuse but meshtrain runs is kept and marked (accelerate_refusal()),
// never hidden.
//
//   auto checked = ParallelLayout::check(config, &model, Placement::of(config));
//   if (!checked.ok()) show(checked.report.errors());
//   const ParallelLayout& layout = *checked.layout;
//   layout.dp_size(); layout.fsdp_group();
//   worst_stage_memory(layout, model, options); estimate_time(layout, model, options);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/memory_estimate.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/run_config.h"
#include "core/time_estimate.h"
#include "core/validation.h"

namespace meshwork {

struct LayoutCheck;

class ParallelLayout {
 public:
  // Applies every rule (core/validation.h). `model` may be null (model rules skipped); it must
  // outlive the call only.
  static LayoutCheck check(const RunConfig& config, const ModelSpec* model, const Placement& placement,
                           const TrainerSupport& support = {});

  const MeshShape& shape() const { return mesh_.shape(); }
  const DeviceMesh& mesh() const { return mesh_; }
  int size(Axis axis) const { return shape()[axis]; }
  int world_size() const { return mesh_.world_size(); }
  int ranks_per_node() const { return mesh_.gpus_per_node(); }
  int num_nodes() const { return mesh_.num_nodes(); }

  // Ranks that read different samples: dp_replicate x dp_shard (cp and tp ranks share theirs).
  int dp_size() const { return shape().group_size(GroupKind::dp); }
  // The group FSDP shards parameters over: dp_shard, or dp_shard x cp when cp > 1 (cp ranks hold
  // the same weights, so they share the shards as torchtitan does).
  GroupKind fsdp_group() const { return size(Axis::cp) > 1 ? GroupKind::dp_shard_cp : GroupKind::dp_shard; }
  int fsdp_size() const { return shape().group_size(fsdp_group()); }
  // Expert parallel (MoE): ranks the experts are split over, borrowed from dp_shard x cp x tp,
  // and the ranks that FSDP-shard one expert set (efsdp = dp_shard x cp x tp / ep; core/mesh.h).
  int ep_size() const { return shape().ep; }
  int efsdp_size() const { return shape().efsdp_size(); }
  // Ranks the loss and gradients are averaged over: dp_replicate x dp_shard x cp.
  int dp_cp_size() const { return shape().group_size(GroupKind::dp_cp); }
  // What seq_len must be a multiple of (the rule's own divisor, core/validation.h).
  int64_t seq_len_divisor() const;
  // Sequences per optimizer step on one dp rank, in micro-batches: global / (micro * dp).
  int64_t grad_accum_steps() const { return grad_accum_steps_; }
  // Tokens of one step that one dp replica processes: global_batch * seq_len / dp.
  int64_t tokens_per_replica_step() const;
  // The kv heads are copied onto tp / kv_heads ranks (tp > num_key_value_heads).
  bool kv_replicated() const { return kv_replicated_; }
  // Non-empty when Accelerate's ParallelismConfig would refuse this shape: its reason.
  const std::string& accelerate_refusal() const { return accelerate_refusal_; }
  const std::vector<Diagnostic>& warnings() const { return warnings_; }

  // The run's training settings the layout was checked with, and what its trainer supports.
  const TrainingConfig& training() const { return training_; }
  const TrainerSupport& support() const { return support_; }

  // The estimators' queries for this layout: its shape, ranks per node, training settings and
  // trainer support, with the model and how to estimate (each query holds its own copies, so
  // it may outlive the layout and go to another thread).
  MemoryQuery memory_query(const ModelSpec& model, const MemoryModel& knobs = {}) const;
  TimeQuery time_query(const ModelSpec& model, const EstimateOptions& options) const;
  // With the hardware's defaults only (no calibration, no fit).
  TimeQuery time_query(const ModelSpec& model, const HardwareModel& hardware) const;

 private:
  ParallelLayout(DeviceMesh mesh, const TrainingConfig& training) : mesh_(std::move(mesh)), training_(training) {}

  DeviceMesh mesh_;
  TrainingConfig training_;
  TrainerSupport support_;
  int64_t grad_accum_steps_ = 1;
  bool kv_replicated_ = false;
  std::string accelerate_refusal_;
  std::vector<Diagnostic> warnings_;
};

// The outcome of a check: every diagnostic, and the layout when no rule refused it.
struct LayoutCheck {
  ShapeReport report;
  std::optional<ParallelLayout> layout;
  bool ok() const { return layout.has_value(); }
  // "field: value: message" of each error, in rule order (the words every front end shows).
  std::vector<std::string> error_texts() const;
};

// A checked layout's estimates under `options`: the memory of its largest pipeline stage (the
// one that decides whether it fits) and the step time. What `meshwork plan` and the workbench
// show.
MemoryBreakdown worst_stage_memory(const ParallelLayout& layout, const ModelSpec& model, const EstimateOptions& options);
TimeEstimate estimate_time(const ParallelLayout& layout, const ModelSpec& model, const EstimateOptions& options);

}  // namespace meshwork
