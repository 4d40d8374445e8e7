// Peak memory of one rank for a model, a mesh shape and a training setup, term by term.
//
// Every term is an explicit formula (derivations in memory_estimate.cpp and docs/estimator.md) so
// that it can be checked against hand calculations and calibrated against meshtrain's measured
// peaks (its CPU tracking allocator counts exact tensor bytes; CUDA uses the caching allocator's
// statistics). Knobs that encode how the trainer behaves, rather than the model, sit in
// MemoryModel with documented defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/run_config.h"
#include "core/validation.h"

namespace meshwork {

// Which attention the shape runs. fused: flash / memory-efficient SDPA (what LibTorch 2.x runs on
// CUDA and on CPU) keeps q, k, v, the output and a log-sum-exp per head and token, never a
// seq x seq matrix. materialized: a plain softmax(q k^T) v (e.g. an eager implementation or an
// attention mask the fused kernels refuse) keeps the b x heads x s x s probabilities of every
// layer.
enum class AttentionKernel { fused, materialized };
std::string_view to_string(AttentionKernel a);
AttentionKernel default_attention_kernel(DeviceKind device);
// Framework reserve: CUDA context, cuBLAS/NCCL workspaces and allocator slack not visible as
// tensors (~1 GiB on a GPU); 0 on CPU, where meshtrain counts tensor bytes exactly.
int64_t default_reserve_bytes(DeviceKind device);

// The routing imbalance assumed until a run has measured one: balanced.
inline constexpr double kDefaultMoeImbalance = 1.0;

// How the trainer and its framework behave, as far as memory goes, beyond what the run config
// says (its settings are the query's TrainingConfig). Defaults follow meshtrain / torchtitan.
struct MemoryModel {
  std::optional<AttentionKernel> attention;  // unset: default_attention_kernel(device)
  std::optional<int64_t> reserve_bytes;      // unset: default_reserve_bytes(device)
  int fsdp_prefetch_layers = 1;   // layers all-gathered ahead of the one computing (FSDP2: 1)
  // fp32 tensors of logits size alive at the loss besides the logits themselves: the
  // log-softmax output saved for backward and its gradient.
  double logits_fp32_copies = 2.0;
  // Multiplier on the last layer's backward working set (activation gradients in flight).
  double backward_transient_layers = 1.0;
  // DDP gradient bucket (pure replication): the flat buffer all-reduced at once; 0 = all grads.
  int64_t ddp_bucket_bytes = 25LL << 20;
  // meshtrain's DDP: every unit (a decoder layer, the root) is its own bucket, all-reduced as
  // soon as backward has completed its gradient; a unit completes after its activations are
  // freed, so at the backward peak at most one unit's buffer is in flight (the largest counts).
  // false: torch DDP's fixed-size buckets (ddp_bucket_bytes).
  bool ddp_unit_buckets = true;
  // zero_grad(set_to_none = true), LibTorch's default: gradients are rebuilt during backward.
  bool grads_freed_between_steps = true;
  // Mixture of experts with ep > 1: tokens the busiest ep rank receives over the mean (1.0 =
  // perfectly balanced routing, which the load-balancing loss aims at). Until a run measures it,
  // the default; the time estimate reads the same value (TimeQuery::moe_imbalance).
  double moe_imbalance = kDefaultMoeImbalance;
};

// Held by value, so a query kept (copied, stored, handed to a thread) never outlives its model
// or its settings. ParallelLayout::memory_query() makes it for a checked layout.
struct MemoryQuery {
  ModelSpec model;  // required
  MeshShape shape;  // resolved (every size >= 1)
  // The run's training settings. The estimate reads seq_len, micro_batch, global_batch (the
  // micro-batches a step accumulates: gradients persist across them), precision,
  // activation_checkpointing, device, sequence_parallel (tp > 1: norms on seq/tp shards),
  // fsdp_grad_sync (step: every unit's unsharded fp32 gradient summed locally between
  // micro-batches, FSDP2's set_requires_gradient_sync(False)), and with pp > 1 pp_schedule and
  // pp_virtual_stages (how many micro-batches' activations a stage holds,
  // core/pipeline_schedule.h). A bare query: bf16 on a GPU, no accumulation (global_batch 0).
  TrainingConfig training{.seq_len = 0, .global_batch = 0, .precision = Precision::bf16, .device = DeviceKind::cuda};
  TrainerSupport trainer;  // vocab_parallel: embedding and lm_head split over the vocabulary across tp
  // The pipeline stage estimated (estimate_memory_stages gives them all, worst_stage_memory the
  // largest).
  int pp_stage = 0;
  MemoryModel knobs;

  // Micro-batches per optimizer step on one dp rank: global_batch / (micro_batch x dp) when the
  // batches are given and divide, else 1.
  int64_t grad_accum_steps() const;
};

struct MemoryTerm {
  std::string name;     // "params", "activations.attention", ...
  int64_t bytes = 0;
  std::string formula;  // the formula with this query's numbers, for tooltips and calibration
};

// Bytes per rank. Two phases compete for the peak: forward/backward and the optimizer step.
// Within backward, the loss moment (logits) and the last layer's backward (backward_transient)
// compete too; only the larger counts. at_peak() gives the JSON / table groups (params, grads,
// optimizer, activations, buffers, reserve, total) as held at the peak, so they sum to total.
struct MemoryBreakdown {
  int64_t params = 0;          // fp32 (master) parameters this rank owns, + bf16 copies w/o FSDP
  int64_t grads = 0;           // fp32 gradients of the owned parameters (optimizer step)
  int64_t grads_at_backward_peak = 0;  // what of them exists at the backward peak
  int64_t optimizer = 0;       // AdamW exp_avg + exp_avg_sq, fp32
  int64_t activations = 0;     // saved for backward by all layers (or their checkpoints)
  int64_t logits = 0;          // loss moment: head's saved tensors, logits, log-softmax, grads
  int64_t backward_transient = 0;  // last layer's backward: gradients in flight (+ recompute)
  int64_t gather_buffers = 0;  // FSDP unsharded params/grads in flight, bf16 grads w/o FSDP
  int64_t comm_buffers = 0;    // DDP bucket, cp ring k/v blocks
  int64_t optimizer_step_temp = 0;  // AdamW step temporaries (a phase without activations)
  int64_t reserve = 0;

  // activations + max(logits, backward_transient)
  int64_t activations_total() const;
  int64_t buffers() const { return gather_buffers + comm_buffers; }
  // params + grads_at_backward_peak + optimizer + activations_total + buffers.
  int64_t backward_phase() const;
  // Optimizer step: params + grads + optimizer + step temporaries.
  int64_t step_phase() const;
  // max(backward_phase, step_phase) + reserve.
  int64_t total() const;
  bool fits(int64_t device_bytes) const { return total() <= device_bytes; }

  struct Peak {
    int64_t params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0, reserve = 0,
            total = 0;
  };
  Peak at_peak() const;
  // The same moment as named parts, in the order a stacked bar shows them, summing to total():
  // params, grads, optimizer, then activations and buffers when backward sets the peak or
  // "step temporaries" when the optimizer step does, and reserve.
  std::vector<MemoryTerm> peak_terms() const;

  AttentionKernel attention = AttentionKernel::fused;
  int64_t owned_params = 0;   // parameter elements stored on this rank (after tp and FSDP)
  int64_t tp_params = 0;      // parameter elements of this rank's tp shard (before FSDP)
  int64_t fsdp_shards = 1;    // dp_shard * cp
  int64_t expert_shards = 1;  // MoE: ranks one expert set is FSDP-sharded over (efsdp, or dp_shard * cp with ep = 1)
  int64_t routed_tokens = 0;  // MoE: token copies one rank's experts compute per micro-batch (x top-k, x imbalance)
  int64_t tokens = 0;         // tokens of one micro-batch on this rank: micro_batch * seq/cp
  // Pipeline: the stage estimated, its decoder layers, and the layer-micro-batches whose
  // activations it holds at its peak (its layers with pp = 1: one micro-batch at a time).
  int pp_stage = 0;
  int64_t stage_layers = 0;
  int64_t held_layers = 0;
  std::vector<MemoryTerm> terms;  // every contribution with its formula
};

// Never fails for a resolved shape and a model; divisibility is validate_shape's job.
MemoryBreakdown estimate_memory(const MemoryQuery& query);
// Every pipeline stage (query.pp_stage ignored), stage 0 first; one entry when pp = 1.
std::vector<MemoryBreakdown> estimate_memory_stages(const MemoryQuery& query);
// The stage with the largest total (the one that decides whether the shape fits).
MemoryBreakdown worst_stage_memory(const MemoryQuery& query);

}  // namespace meshwork
