// The parallelize step (torchtitan's parallelize_llama): one function applies every
// parallelism to a plain Model, in this order, and returns the one object the step talks to.
//
//   1. tensor parallel (parallelize_tp.h): cuts the model into this tp rank's pieces (local
//      layouts) and installs its region operators, vocabulary-parallel embedding and
//      cross-entropy. It goes first because everything after it sees only the local pieces.
//   2. context parallel (parallelize_cp.h): installs ring attention as the attention core. It
//      changes no parameter, only how attention reaches the other cp ranks' tokens.
//      Expert parallel (parallelize_ep.h), for a mixture of experts with ep > 1: the local
//      layouts of step 1 keep this ep rank's experts (TpOptions::ep), and the experts' rows are
//      dispatched to the ranks holding theirs and combined back (BlockOps::experts).
//   3. data parallel (parallelize_dp.h): wraps the local pieces: builds every unit from the
//      seed, keeps the tp piece (TensorParallel::localize) and then this rank's FSDP shard
//      (over dp_shard_cp once cp > 1, since cp ranks hold the same parameters). Last because
//      it shards what tp left, and TensorParallel::annotate() then marks the ranges tp holds
//      alike on several ranks (for the global gradient norm).
//
// Pipeline parallelism comes before all three (torchtitan's pipeline_llama, then parallelize
// each stage): the caller cuts the model to this stage rank's chunks with Model::keep_chunks
// (before a Hugging Face checkpoint is opened, so only the stage's tensors are read), so tp, cp
// and dp see only the stage's units; parallelize_pp.h then runs the schedule over chunk_forward().
//
// The TP/DP wiring (localize, annotate, tp's gradient sums after dp's reductions) lives only
// here; the training step calls ParallelModel and never the pieces.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "trainer/comm.h"
#include "trainer/model.h"
#include "trainer/parallelize_cp.h"
#include "trainer/parallelize_dp.h"
#include "trainer/parallelize_ep.h"
#include "trainer/parallelize_tp.h"

namespace meshwork::trainer {

struct ParallelizeOptions {
  bool sequence_parallel = true;  // tp > 1
  at::ScalarType compute_dtype = at::kFloat;
  at::Device device = at::kCPU;
  uint64_t seed = 0;
  bool fsdp_grad_sync_per_step = false;  // DataParallelOptions
  // The group FSDP shards over: ParallelLayout::fsdp_group() (dp_shard, or dp_shard_cp once cp > 1).
  GroupKind fsdp_group = GroupKind::dp_shard;
  // When set, the initial weights are read, not drawn from the seed: elements [offset, offset +
  // count) of parameter `param` (index in Model::full_layout(unit)) of the full row-major tensor,
  // as float into out (a Hugging Face checkpoint, hf/checkpoint_loader.h). Only the ranges this
  // rank owns after tp's cut and FSDP's shard are asked for.
  std::function<void(int unit, int param, int64_t offset, int64_t count, float* out)> read_full;
};

class ParallelModel {
 public:
  // The flat fp32 parameters the optimizer updates (DataParallel's, in unit order).
  std::vector<at::Tensor>& params() { return params_; }

  // Sum over this rank's tokens of the cross-entropy (Model::loss_sum with dp's weights).
  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets,
                      const ForwardOptions& options) const {
    return model_.loss_sum(inputs, targets, *dp_, options);
  }
  // The same without autograd, for evaluation: no gradient, and every gathered unit is freed
  // afterwards. Every rank of the mesh must call it together (it communicates as training does).
  at::Tensor eval_loss_sum(const at::Tensor& inputs, const at::Tensor& targets,
                           const ForwardOptions& options) const;
  // One pipeline chunk (Model::chunk_forward with dp's weights).
  at::Tensor chunk_forward(const PipelineChunk& chunk, const at::Tensor& input, const at::Tensor& targets,
                           const ForwardOptions& options) const {
    return model_.chunk_forward(chunk, input, targets, *dp_, options);
  }
  // After forwards without backward (a pipeline's evaluation): frees every gathered unit.
  void end_forward_only() { dp_->end_forward_only(); }
  // The sequence length of the residual stream between blocks on this rank, for sequences of
  // `local_seq_len` tokens (after cp's cut): a tp shard of it under sequence parallelism.
  int64_t residual_seq_len(int64_t local_seq_len) const {
    return tp_->sequence_parallel() ? local_seq_len / tp_->size() : local_seq_len;
  }
  const Model& model() const { return model_; }
  // What a checkpoint needs to map this rank's flat parameters to the full tensors (reshard.h):
  // each flat parameter's unit and shard, and tp's runs of a unit's local range.
  const std::vector<FlatParam>& flat_params() const { return dp_->params(); }
  std::vector<TensorParallel::SourceRun> source_runs(int unit, int64_t offset, int64_t count) const {
    return tp_->source_runs(unit, offset, count);
  }
  // The same for elements [offset, offset + count) of flat parameter `fp` (a unit's whole local
  // flat, or under expert parallelism its dense or its expert part, FlatParam::expert).
  std::vector<TensorParallel::SourceRun> flat_source_runs(const FlatParam& fp, int64_t offset, int64_t count) const;
  // Whether tp ranks hold different tokens of a sequence (sequence parallelism).
  bool sequence_parallel() const { return tp_->sequence_parallel(); }
  // This rank's cp tokens of [B, T] sequences, and their RoPE positions (none without cp).
  at::Tensor shard_sequence(const at::Tensor& x) const { return cp_->shard(x); }
  std::optional<at::Tensor> positions(int64_t seq_len, at::Device device) const;

  // Before the last micro-batch's backward (DataParallel::arm_gradient_sync).
  void arm_gradient_sync() { dp_->arm_gradient_sync(); }
  void arm_gradient_sync(const std::vector<int>& units) { dp_->arm_gradient_sync(units); }
  // After the last micro-batch's backward: dp's reductions, then tp's sums of partial
  // gradients of replicated pieces. Gradients are then whole on every rank.
  void finish_gradients();
  // Global L2 norm of every gradient over the whole mesh (each element counted once).
  double grad_norm() { return dp_->grad_norm(); }
  void zero_grad() { dp_->zero_grad(); }

 private:
  explicit ParallelModel(Model& model) : model_(model) {}
  friend std::unique_ptr<ParallelModel> parallelize(Model&, Communicator&, const ParallelizeOptions&);

  Model& model_;
  std::unique_ptr<TensorParallel> tp_;
  std::unique_ptr<ContextParallel> cp_;
  std::unique_ptr<ExpertParallel> ep_;
  std::unique_ptr<DataParallel> dp_;
  std::vector<at::Tensor> params_;
};

// Applies tp, cp, dp to `model` (module comment). `model` and `comm` must outlive the result.
std::unique_ptr<ParallelModel> parallelize(Model& model, Communicator& comm,
                                           const ParallelizeOptions& options);

}  // namespace meshwork::trainer
