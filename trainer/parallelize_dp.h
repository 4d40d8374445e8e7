// Data parallelism applied to a Model from outside (torchtitan's parallelize step):
//   dp_replicate  DDP: every replica holds every parameter; after the last micro-batch the
//                 gradients are all-reduced over dp_replicate in buckets of ~25 MB (DDP's
//                 default), walked in backward order.
//   dp_shard      FSDP / ZeRO-3, one unit per decoder block plus the root unit: each rank keeps
//                 1/n of every unit's flat parameter (padded to a multiple of n), its gradient
//                 and its AdamW state. A block's full parameters are all-gathered just before its
//                 forward and freed right after; gathered again just before its backward (a hook
//                 on the block's output) and freed after; the full gradient is reduce-scattered.
//                 The next block's all-gather is started (asynchronously) while the current one
//                 computes, in forward and in backward (FSDP2's prefetch of one unit).
//                 The root unit (embedding, final norm, head) stays gathered from its forward to
//                 the end of the backward, as FSDP2 does for the root.
//   both          HSDP: shard inside dp_shard, then all-reduce the shard gradients over
//                 dp_replicate.
// Shards over dp_shard, or over dp_shard_cp once cp > 1. Mixed precision as FSDP2's
// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): fp32 master shards, bf16 gathers,
// fp32 gradient reduction.
//
// Every gradient reduction is a SUM: each rank's loss is its token-loss sum divided by the token
// count of the whole global batch, so the sum of every rank's gradient is the gradient of the
// global mean (the same meaning for every shape).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "trainer/comm.h"
#include "trainer/model.h"

namespace meshwork::trainer {

// One unit's flat parameter as the optimizer sees it.
struct FlatParam {
  int unit = 0;
  // Expert parallelism: this flat parameter holds the unit's expert slices (the range
  // DataParallelOptions::expert_range gives), sharded over efsdp; the unit's other parameters
  // are in the flat parameter before it, whose offsets skip that range.
  bool expert = false;
  // Both flat parameters of such a unit: where the expert range starts in the unit's local flat
  // layout and its length (0: the unit is not split).
  int64_t expert_lo = 0, expert_numel = 0;
  at::Tensor param;       // fp32 leaf: the full unit (replicated) or this rank's shard
  int64_t numel = 0;      // the unit's element count (unpadded)
  int64_t padded = 0;     // padded to a multiple of the shard group size
  bool sharded = false;
  int64_t shard_offset = 0;  // where `param` starts in the unit's (padded) local flat tensor
  // How many ranks hold an identical copy of `param` (the global grad norm counts each once):
  // the data-parallel ranks that are not shards of each other, world / (shard group * tp).
  int copies = 1;
  // Ranges of `param` that tp replicates besides (norm weights, copied kv heads): held by
  // copies * tp_copies ranks. Filled by TensorParallel::annotate().
  struct TpCopies {
    int64_t offset = 0, numel = 0;  // in `param`
    int tp_copies = 1;
  };
  std::vector<TpCopies> tp_copies;
};

struct DataParallelOptions {
  GroupKind shard_group = GroupKind::dp_shard;  // dp_shard_cp when cp > 1
  at::ScalarType compute_dtype = at::kFloat;
  at::Device device = at::kCPU;
  int64_t bucket_bytes = 25 << 20;
  // FSDP: sum the unsharded gradient over the micro-batches and reduce-scatter it once, in the
  // last backward (--fsdp-grad-sync step); false: reduce-scatter in every backward.
  bool fsdp_grad_sync_per_step = false;
  uint64_t seed = 0;
  // Pipeline parallelism: several micro-batches hold the root's gathered weights for their
  // backward at once (the head's matmul saves them), so the root stays gathered until
  // finish_gradients() instead of being freed after each backward.
  bool keep_root_gathered = false;
  // Turns a unit's full flat fp32 parameters into the piece this rank's model reads (a tensor
  // parallel plan slices them; identity by default). Must match model.layout(unit).
  std::function<at::Tensor(int unit, const at::Tensor& full)> localize;
  // When set, the initial weights come from here instead of the seed (a checkpoint): elements
  // [offset, offset + count) of the unit's local (tp) flat parameters as a fresh fp32 CPU tensor
  // of count elements, zero past the unit's end (FSDP padding). Asked only for this rank's part,
  // so no rank builds a unit it does not own.
  std::function<at::Tensor(int unit, int64_t offset, int64_t count)> read_local;
  // Expert parallelism (trainer/parallelize_ep.h): the range [first, second) of a unit's local
  // flat parameters that holds this rank's expert slices ({0, 0}: none). Such a unit keeps two
  // flat parameters: the rest, sharded over shard_group as any unit, and the experts, sharded
  // over expert_shard_group (efsdp: the ranks holding the same experts). Each gradient is
  // reduce-scattered over its own group, so expert gradients are never summed over ep.
  std::function<std::pair<int64_t, int64_t>(int unit)> expert_range;
  const Group* expert_shard_group = nullptr;
};

class DataParallel : public WeightSource {
 public:
  // Builds every unit from the seed (identically on every rank) and keeps this rank's part, or
  // reads only this rank's part (options.read_local).
  DataParallel(Model& model, Communicator& comm, DataParallelOptions options);
  ~DataParallel() override;

  at::Tensor acquire(int unit) override;
  at::Tensor release(int unit, at::Tensor output) override;

  // The flat parameters of the units this rank holds (Model::holds), in unit order; a unit with
  // experts under expert parallelism has two (FlatParam::expert), dense first.
  std::vector<FlatParam>& params() { return params_; }
  // Call before the last micro-batch's backward (every dp kind): DDP (and FSDP with
  // fsdp_grad_sync_per_step) reduce the gradients summed over the micro-batches in that backward
  // only. Each replicated (DDP) unit's gradient is then all-reduced over dp_replicate as soon as
  // backward has produced it (a hook on the flat parameter), overlapping the reduction with the
  // rest of the backward, as DDP does.
  void arm_gradient_sync();
  // The same for some units only: a pipeline stage arms each chunk's units before that chunk's
  // last backward of the step (its chunks finish at different times).
  void arm_gradient_sync(const std::vector<int>& units);
  // After the last micro-batch's backward: all-reduces gradients over dp_replicate (DDP, or
  // HSDP's shard gradients), in buckets, and frees any unit still gathered.
  void finish_gradients();
  // Global L2 norm of every gradient over the whole mesh (each element counted once).
  double grad_norm();
  // Scales every gradient by `factor`.
  void scale_gradients(double factor);
  void zero_grad();
  // After a forward without backward (evaluation): frees every unit still gathered (the root
  // stays gathered after a forward, waiting for a backward that will not come).
  void end_forward_only();
  // Bytes this rank holds in parameters (for logs/tests).
  int64_t local_param_numel() const;

  // Implementation detail shared with the autograd function in the .cpp.
  struct Unit;

 private:
  void gather(Unit& u);
  // Expert parallelism: a unit with its own expert flat parameter (DataParallelOptions::expert_range).
  void add_split_unit(Unit& u, const at::Tensor& local, int64_t lo, int64_t hi);
  at::Tensor gather_split(Unit& u);
  void prefetch(int unit);
  void free(Unit& u);
  friend struct UnshardFunction;
  friend struct UnshardSplitFunction;

  Unit& unit(int index) { return *units_[slot_[index]]; }
  bool held(int index) const { return index >= 0 && index < static_cast<int>(slot_.size()) && slot_[index] >= 0; }

  Model& model_;
  Communicator& comm_;
  DataParallelOptions options_;
  std::vector<FlatParam> params_;            // the held units' flat parameters, in unit order
  std::vector<std::unique_ptr<Unit>> units_;  // the held units, in unit order
  std::vector<int> slot_;                     // unit -> index in units_, -1: not held
  std::vector<bool> armed_;                   // per slot: gradient sync armed for this backward
  int last_acquired_ = -1;  // the unit acquired last (prefetch direction)
  struct AllReduceWhenAccumulated;  // starts a replicated unit's all-reduce (DDP overlap)
  // In-flight all-reduces of replicated units: (unit, reduced buffer, work).
  struct InFlight {
    int unit;
    at::Tensor buffer;
    Communicator::Pending pending;
  };
  std::vector<InFlight> in_flight_;
};

}  // namespace meshwork::trainer
