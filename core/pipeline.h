// Pipeline parallelism's arithmetic, in one place for meshtrain, the estimates and the planner:
// where the decoder layers are cut into stages, how many micro-batches each stage holds in flight
// under each schedule, and the bubble (the share of a step the stages wait).
//
// Notation: pp stages (mesh axis pp), V chunks of layers per rank (pp_virtual_stages; 1 except
// for interleaved-1f1b), K = pp * V chunks in all, M micro-batches per optimizer step (gradient
// accumulation steps), t the time of one micro-batch's forward + backward on one chunk.
//
// Chunk k (0 <= k < K) runs on stage rank k % pp (Megatron's and torchtitan's interleaving: rank
// r holds chunks r, r + pp, r + 2pp, ...). Chunk 0 also holds the embedding, chunk K - 1 the
// final norm and the output head.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model_spec.h"
#include "core/run_config.h"

namespace meshwork {

struct PipelineChunk {
  int first_layer = 0;  // decoder layers [first_layer, first_layer + num_layers)
  int num_layers = 0;
  bool embedding = false;  // chunk 0
  bool head = false;       // chunk K - 1: final norm + lm_head
  int rank = 0;            // the stage rank that runs it: index % pp
  double cost = 0;         // relative forward + backward cost (pipeline_chunk_costs' unit)
};

// Relative cost of one token through a decoder layer and through the head, in multiply-adds:
// a layer's matmul weights plus its attention scores and values (2 * seq_len * q_dim: each token
// against the s/2 earlier tokens on average, scores and values), the head's h * vocab. The
// embedding is a lookup (0). Only ratios matter: they balance the cut.
struct PipelineCosts {
  double layer = 0;
  double head = 0;
};
PipelineCosts pipeline_costs(const ModelSpec& model, int64_t seq_len);

// Cuts num_hidden_layers decoder layers into pp * V contiguous chunks, in order, minimising the
// most expensive chunk (the pipeline moves at the pace of its slowest stage), ties broken toward
// equal layer counts. Every chunk holds at least one layer; precondition: layers >= pp * V
// (validate_shape's rule). With pp = 1 and V = 1: one chunk holding everything.
std::vector<PipelineChunk> pipeline_cut(const ModelSpec& model, int64_t seq_len, int pp, int virtual_stages);

// Chunk-micro-batches whose activations stage rank `rank` holds at once, at its peak:
//   gpipe:            M (every forward runs before the first backward);
//   1f1b:             min(M, pp - rank) (warm-up forwards, then one backward per forward);
//   interleaved-1f1b: min(M * V, 2 (pp - rank - 1) + (V - 1) pp + 1) (Megatron's warm-up of
//                     chunk forwards before the steady one-forward-one-backward).
int64_t pipeline_in_flight(PipelineSchedule schedule, int pp, int virtual_stages, int64_t micro_batches,
                           int rank);

// The share of a step every stage waits (fill and drain), for balanced chunks:
//   gpipe, 1f1b:      (pp - 1) / (M + pp - 1)        (Huang et al. 2019; Narayanan et al. 2021)
//   interleaved-1f1b: (pp - 1) / (V M + pp - 1)      (the fill is pp - 1 chunk times, 1/V as long)
// Derivation: a stage computes M micro-batches of V chunks, M V t busy; the last stage starts
// (pp - 1) chunk forwards after the first and the first ends (pp - 1) chunk backwards after the
// last, so a step lasts (M V + pp - 1) t and the idle share is (pp - 1) / (M V + pp - 1).
double pipeline_bubble_fraction(PipelineSchedule schedule, int pp, int virtual_stages, int64_t micro_batches);

}  // namespace meshwork
