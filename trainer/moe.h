// The mixture-of-experts MLP of a sparse decoder layer (Qwen3-MoE, Mixtral, OLMoE), as
// transformers computes it, and the load-balancing auxiliary loss. The maths: docs/moe.md.
//
//   router       p = softmax(x W_r^T) in fp32, W_r [E, H] (no bias)
//   top-k        the K experts of highest p per token, weights p_k (renormalised to sum to one
//                when norm_topk_prob; Mixtral always)
//   experts      y = sum_k w_k down_e(silu(gate_e(x)) * up_e(x)), every token kept (no capacity)
//
// The (token, expert) pairs are sorted by expert, so each expert's GEMMs run on one contiguous
// slice of rows (a loop over experts, never over tokens), then scattered back with index_add.
//
// Auxiliary loss (transformers' load_balancing_loss_func, over one forward call: every sparse
// layer's rows of the micro-batch together). With c_e the number of top-k picks of expert e and
// S_e the sum of p_e over every row of every sparse layer, R = rows x sparse layers:
//   aux = E * sum_e (c_e / R) (S_e / R)
// c is a count (no gradient), so d aux / d S_e = E c_e / R^2: a constant of the whole forward,
// known only once the last sparse layer has routed. Each layer hands its S (its own rows) to a
// node that passes the activation gradient through unchanged and adds that constant gradient
// to S in backward (RouterAuxGradient in moe.cpp), by which time the forward is complete. So
// activation checkpointing (which reruns the layer inside backward) gets the same gradient.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "core/model_spec.h"

namespace meshwork::trainer {

// One forward call's routing: what the aux loss needs. Made fresh by Model at the start of
// each forward that holds the embedding; filled by each sparse layer while `recording`.
struct MoeForwardState {
  at::Tensor counts;    // [E] fp32: top-k picks per expert, summed over the sparse layers
  at::Tensor prob_sum;  // [E] fp64, no graph: routing probabilities summed over rows and layers
  double rows = 0;      // rows routed, summed over the sparse layers (R above)
  // d(objective)/dS_e = grad_scale * counts_e, a [1] fp64 tensor set when the forward call is
  // complete (R is known then: under cp or sequence parallelism it spans several ranks).
  at::Tensor grad_scale;
  bool aux_in_objective = false;  // output_router_logits with a positive coefficient
  bool recording = false;         // off while checkpointed layers rerun in backward
};

// What a step's forwards routed, per sparse layer (metrics). Summed over the step's forwards.
struct MoeStepStats {
  std::vector<int> layers;                            // the sparse layers, in order
  std::vector<std::vector<double>> tokens_per_expert;  // [layer index][expert]
  double aux_loss_sum = 0;  // aux of each forward, summed
  int64_t forwards = 0;
  void reset(const ModelSpec& spec);
};

// The experts' GEMMs on rows [M, H] sorted by expert: counts[e] consecutive rows for expert e
// of the stacked gate/up [n, Ie, H], down [n, H, Ie] (n = counts.size()). Returns [M, H] in the
// same order: one GEMM triple per expert with rows, never a loop over tokens.
at::Tensor run_grouped_experts(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                               const at::Tensor& up, const at::Tensor& down);

// Where the experts run (BlockOps::experts): rows [M, H] sorted by global expert with counts[e]
// rows for expert e of all E, and this rank's stacked expert tensors (all E, or its E/ep under
// expert parallelism, trainer/parallelize_ep.h) -> the rows' outputs, in the same order.
using ExpertRunner = std::function<at::Tensor(const at::Tensor& rows, const std::vector<int64_t>& counts,
                                              const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down)>;

// The MoE MLP on x [N, H] (compute dtype): router [E, H], expert_gate/expert_up [E, Ie, H],
// expert_down [E, H, Ie] (or this rank's E/ep of them, with `experts` dispatching the rows to
// the ranks holding theirs; unset: run_grouped_experts here). Records routing into `state` (when recording) and `stats` (layer
// index `slot`), and ties the aux gradient to the output when state.aux_in_objective.
at::Tensor moe_mlp(const at::Tensor& x, const at::Tensor& router, const at::Tensor& expert_gate,
                   const at::Tensor& expert_up, const at::Tensor& expert_down, const MoeSpec& moe,
                   MoeForwardState& state, MoeStepStats& stats, int slot,
                   const ExpertRunner& experts = {});

// The aux loss value of a finished forward (E sum_e c_e S_e / R^2); 0 before any routing.
double moe_aux_loss(const MoeForwardState& state, int64_t num_experts);

}  // namespace meshwork::trainer
