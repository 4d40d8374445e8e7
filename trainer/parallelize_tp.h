// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) and sequence parallelism (Korthikanti et
// al. 2022) applied to a Model from outside, torchtitan's `parallelize_llama` split: the model has
// no parallel code; this file says, in ONE table (tp_plan()), how every parameter is cut over
// the tp group, and installs the matching region operators in the model's BlockOps.
//
//   parameter   style        piece on tp rank r (of t)                   region
//   embed       vocab        rows [r V/t, (r+1) V/t)                     masked lookup, then exit
//   norm        replicate    whole (partial grads summed under SP)       final norm
//   head        vocab        rows [r V/t, (r+1) V/t)                     entry, vocab-parallel CE
//   attn_norm   replicate    whole                                        norm before attention
//   wq, bq      colwise      output rows of heads [r Hq/t, (r+1) Hq/t)    after entry
//   wk,wv,bk,bv colwise_kv   kv heads [r Hkv/t, ...) or, when t > Hkv, head r/(t/Hkv) (a copy)
//   wo          rowwise      input columns of this rank's q heads         before exit
//   mlp_norm    replicate    whole
//   w_gate,w_up colwise      rows [r I/t, (r+1) I/t)
//   w_down      rowwise      columns [r I/t, (r+1) I/t)
//
// Region operators (custom autograd functions, one collective each way):
//   entry (before a column-parallel matmul):  SP off: identity fwd / all-reduce bwd (Megatron f)
//                                             SP on:  all-gather seq fwd / reduce-scatter bwd
//   exit  (after a row-parallel matmul):      SP off: all-reduce fwd / identity bwd (Megatron g)
//                                             SP on:  reduce-scatter seq fwd / all-gather bwd
// Under SP the residual stream, norms and the embedding output hold T/t tokens per rank.
//
// Vocabulary parallel: the embedding looks up only the rows of its vocabulary range (other
// tokens give zeros) and the exit operator sums the pieces; the head computes logits of its
// vocabulary range and a parallel cross-entropy (Megatron's) combines them with three small
// tp all-reduces (max, sum of exp, target logit) instead of gathering T x V logits.
//
// Gradients of replicated pieces: with SP a norm weight sees only its sequence shard, and a kv
// head copied on t/Hkv ranks sees only its ranks' q heads, so their gradients are partial and
// finish_gradients() sums them over the ranks holding the same copy. Without SP the norms'
// gradients are already whole (the entry operator all-reduced the activation gradient).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "trainer/comm.h"
#include "trainer/model.h"
#include "trainer/parallelize_dp.h"

namespace meshwork::trainer {

enum class TpStyle { replicate, colwise, colwise_kv, rowwise, vocab };

struct TpPlanEntry {
  const char* param;  // name in the model's UnitLayout
  TpStyle style;
};
// The plan: every parameter of the model appears exactly once.
const std::vector<TpPlanEntry>& tp_plan();

// The piece of a full parameter that one of t tp ranks holds, by the plan (its shape; the same
// on every rank). The trainer's local layouts and the exporter both use it.
ParamInfo tp_local_param(const ParamInfo& full, const ModelSpec& spec, int t);
// The full parameter back from the pieces of every tp rank (pieces[r] shaped tp_local_param;
// the inverse of TensorParallel::localize). Copies of a kv head are taken from their first rank.
at::Tensor tp_unsplit(const ParamInfo& full, const ModelSpec& spec, const std::vector<at::Tensor>& pieces);

struct TpOptions {
  bool sequence_parallel = true;
  // Expert parallelism (trainer/parallelize_ep.h) is part of the same cut: with ep > 1 this rank
  // keeps experts [ep_rank E/ep, (ep_rank + 1) E/ep) of each stacked expert tensor (dim 0), whole
  // on every tp rank. Those slices are not tp copies (the ep ranks hold different experts), and
  // Replica offsets then count the unit's dense flat parameter, which skips them (FlatParam::expert).
  int ep = 1, ep_rank = 0;
};

// Whether a parameter is one of a sparse layer's stacked expert tensors (cut over ep).
bool is_expert_param(const std::string& name);

class TensorParallel {
 public:
  // With tp > 1: gives the model its local layouts and installs the region operators, the
  // vocabulary-parallel embedding and the parallel cross-entropy. With tp == 1: does nothing.
  TensorParallel(Model& model, Communicator& comm, TpOptions options);

  bool active() const { return t_ > 1; }
  int size() const { return t_; }
  bool sequence_parallel() const { return active() && options_.sequence_parallel; }
  // This rank's piece of a unit's full flat parameters (DataParallelOptions::localize).
  at::Tensor localize(int unit, const at::Tensor& full) const;
  // Where elements [offset, offset + count) of a unit's local flat parameters come from in the
  // full (unsplit) tensors: runs of consecutive elements, in order. A checkpoint loader reads
  // exactly these (a rowwise piece is one run per row; every other style one run per parameter).
  // The same cut as localize(), which a test checks element for element.
  struct SourceRun {
    int param = 0;           // index in the unit's layout
    int64_t src = 0;         // element offset in the full row-major tensor
    int64_t dst = 0;         // element offset relative to `offset`
    int64_t count = 0;
  };
  std::vector<SourceRun> source_runs(int unit, int64_t offset, int64_t count) const;
  // Records, for every flat parameter, the element ranges copied on several tp ranks (for the
  // global gradient norm). Call once after DataParallel is built.
  void annotate(std::vector<FlatParam>& params) const;
  // After data-parallel reduction: sums partial gradients of replicated pieces over their
  // copies (module comment). Needs the FlatParam ranges from annotate().
  void finish_gradients(std::vector<FlatParam>& params);
  // Splits [B, T, ...] along the sequence into this rank's T/t shard (sequence parallel input
  // of tests; the model itself gets its shard from the embedding's exit operator).
  at::Tensor sequence_shard(const at::Tensor& x) const;

  // A piece of a unit's local flat parameter that `groups` sets of tp ranks hold alike; this
  // rank belongs to set `group`. partial: its gradient must be summed over the set.
  struct Replica {
    int64_t offset = 0, numel = 0;  // in the unit's local (tp) flat layout
    int groups = 1, group = 0;
    int copies = 1;                 // tp ranks per set
    bool partial = false;
  };
  const std::vector<Replica>& replicas(int unit) const { return replicas_[unit]; }

 private:
  Model& model_;
  Communicator& comm_;
  TpOptions options_;
  int t_ = 1, r_ = 0;
  int ep_ = 1, ep_rank_ = 0;
  std::vector<std::vector<Replica>> replicas_;
};

// The region operators, exposed for tests (g is the tp group).
at::Tensor tp_copy_to(const at::Tensor& x, Communicator& comm);        // f: id / all-reduce
at::Tensor tp_reduce_from(const at::Tensor& x, Communicator& comm);    // g: all-reduce / id
at::Tensor tp_gather_seq(const at::Tensor& x, Communicator& comm);     // all-gather dim 1 / r-s
at::Tensor tp_reduce_scatter_seq(const at::Tensor& x, Communicator& comm);  // r-s dim 1 / a-g
// Sum over tokens of -log softmax(logits)[target], logits [N, V/t] this rank's vocabulary range
// (rank r: [r V/t, (r+1) V/t)), targets [N] global ids. fp32 scalar, equal on every tp rank.
at::Tensor vocab_parallel_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& targets,
                                            Communicator& comm);

}  // namespace meshwork::trainer
