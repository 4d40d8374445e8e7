// A plain Llama decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU MLP, optional tied
// embeddings; Qwen3's and OLMoE's q/k RMSNorms; a mixture-of-experts MLP in sparse layers,
// trainer/moe.h), written functionally over flat parameter "units" so that it carries no parallel
// code at all (torchtitan's split: parallelize_*.cpp decides where the weights come from).
//
// Units: unit 0 is the root (token embedding, final norm, output head unless tied); unit 1 + l
// is decoder block l. Each unit's parameters live in ONE flat fp32 tensor (FSDP's flat
// parameter), laid out by its UnitLayout; the model reads them through views. A WeightSource
// hands the model each unit's flat tensor when it needs it (acquire) and hears when the unit's
// forward is done (release): a plain source returns the parameters themselves, FSDP gathers
// shards and frees them again, mixed precision casts to bf16 (all in parallelize_*.cpp).
//
// Hooks for tensor/context parallel are in BlockOps: a plan may replace the attention
// core (ring attention), the entry/exit of the tensor-parallel regions (Megatron f/g operators,
// sequence parallel gathers) and give RoPE positions that follow load-balanced chunks. Head
// counts are read from the weights' shapes, so column-split q/k/v weights just work.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/model_spec.h"
#include "core/pipeline.h"
#include "trainer/moe.h"

namespace meshwork::trainer {

struct ParamInfo {
  std::string name;             // "wq", "embed", ...
  std::vector<int64_t> shape;   // shape of this unit's local piece
  double init_std = 0;          // normal(0, init_std); 0 means "ones" (norm weights)
  int64_t numel() const;
};

struct UnitLayout {
  std::vector<ParamInfo> params;
  int64_t numel() const;
  // Element offset of params[i] in the flat tensor.
  int64_t offset(size_t i) const;
  // Index of the parameter called `name`, or -1.
  int index(const std::string& name) const;
};

// Where the model gets its weights. Implemented by the parallelize step.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The flat parameters of `unit` (numel = layout(unit).numel()), in the compute dtype,
  // connected by autograd to whatever the optimizer updates.
  virtual at::Tensor acquire(int unit) = 0;
  // Called with the unit's output right after its forward. May free buffers and register a
  // hook on `output` (e.g. to gather again before backward); returns the tensor to go on with.
  virtual at::Tensor release(int unit, at::Tensor output) { return output; }
};

// Replaceable pieces of the model (plain single-device versions by default).
struct BlockOps {
  // q [B, Hq, T, D], k/v [B, Hkv, T, D] (Hq a multiple of Hkv) -> [B, Hq, T, D], causal.
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)> attention;
  // Applied to a normed activation before the column-parallel q/k/v or gate/up projections.
  std::function<at::Tensor(const at::Tensor&)> enter_column;
  // Applied to the output of the row-parallel o/down projection before the residual add.
  std::function<at::Tensor(const at::Tensor&)> exit_row;
  // Token embedding: weight [V, H], tokens [B, T] -> [B, T, H] (vocab-parallel plans replace it).
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> embed;
  // Output head + cross-entropy summed over tokens: h [B, T, H], head weight [V, H],
  // targets [B, T] -> fp32 scalar (vocab-parallel plans replace it with a parallel CE).
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)> head_loss_sum;
  // Mixture of experts: sums a forward call's routing statistics (a flat fp64 tensor, in place)
  // over the ranks that hold the call's other tokens (cp, and tp under sequence parallelism),
  // so that the aux loss is that of the whole call. Unset: this rank holds all of them.
  std::function<void(at::Tensor&)> sum_routing;
  // Mixture of experts: where a sparse layer's experts run on its rows (trainer/moe.h's
  // ExpertRunner; expert parallelism dispatches them over the ep group). Unset: here, all E.
  ExpertRunner experts;
};

struct ForwardOptions {
  bool activation_checkpointing = false;  // recompute each block in backward
  at::ScalarType compute_dtype = at::kFloat;
  std::optional<at::Tensor> positions;     // [T] RoPE positions (default 0..T-1)
  // (cos, sin) [T, D] for those positions, made once by Model::rope_tables: every micro-batch
  // and chunk then shares one pair (a pipeline stage holds many micro-batches, whose blocks each
  // save the tables for backward). Unset: made per forward.
  std::optional<std::pair<at::Tensor, at::Tensor>> rope;
  // The factor the caller applies to loss_sum()'s result before backward (run_step: one over the
  // global batch's tokens). A mixture of experts injects its aux loss's gradient inside the
  // layers (trainer/moe.h), so it must know the scale the language-model gradient arrives with.
  double loss_scale = 1.0;
  // Mixture of experts under pipeline stages: a forward call's sparse layers sit on several
  // stages, so a chunk without the embedding starts its routing record from what the call's
  // earlier chunks routed (Model::routing_sums() of the chunk before, sent with its output).
  // Unset: from zero.
  std::optional<at::Tensor> routing_in;
};

class Model {
 public:
  explicit Model(ModelSpec spec);

  const ModelSpec& spec() const { return spec_; }
  int num_units() const { return static_cast<int>(layouts_.size()); }
  int num_layers() const { return static_cast<int>(spec_.num_hidden_layers); }
  static int block_unit(int layer) { return 1 + layer; }
  // The full (unsplit) layout of a unit, and the layout the model reads (equal unless a tensor
  // parallel plan gave local pieces with set_layout).
  const UnitLayout& full_layout(int unit) const { return full_layouts_[unit]; }
  const UnitLayout& layout(int unit) const { return layouts_[unit]; }
  void set_layout(int unit, UnitLayout layout) { layouts_[unit] = std::move(layout); }
  BlockOps& ops() { return ops_; }

  // Pipeline parallelism (parallelize_pp.h): this stage rank keeps only the units of `chunks`
  // (its chunks of core's pipeline_cut): their decoder blocks, and of the root the embedding
  // when it runs chunk 0 and the final norm and head when it runs the last chunk. The root's
  // full layout becomes that subset (tensor parallel and FSDP then cut only what the stage
  // holds); init_unit still draws the numbers of the whole root, so every shape starts alike.
  // Call before anything reads the layouts.
  void keep_chunks(const std::vector<PipelineChunk>& chunks);
  // Whether keep_chunks() cut the model (a pipeline stage).
  bool pipelined() const { return pipelined_; }
  // Whether this rank holds `unit` (every unit unless keep_chunks() dropped it).
  bool holds(int unit) const { return held_[unit]; }
  // The units one chunk reads: its blocks, and the root when it holds the embedding or the head.
  static std::vector<int> chunk_units(const PipelineChunk& chunk);
  // The whole model as one chunk (pp = 1).
  PipelineChunk whole() const;

  // The full flat parameters of `unit`, fp32 on CPU, drawn from `seed` alone: every rank of
  // every mesh shape builds the same numbers, then keeps its shard. Each unit has its own
  // generator (seeded from seed and unit), so units can be built one at a time.
  at::Tensor init_unit(int unit, uint64_t seed) const;

  // Sum over every token of the next-token cross-entropy (fp32 scalar). tokens/targets: [B, T]
  // int64. The caller divides by the global token count (the loss is a mean over the global
  // batch, whatever the shape).
  at::Tensor loss_sum(const at::Tensor& tokens, const at::Tensor& targets, WeightSource& weights,
                      const ForwardOptions& options) const;

  // One chunk of the model: `input` is the tokens [B, T] when the chunk holds the embedding, the
  // previous chunk's output otherwise. Returns the chunk's output (the residual stream, for the
  // next chunk) or, for the chunk holding the head, the cross-entropy summed over every token of
  // `targets` [B, T] (whose T is the sequence length RoPE needs, whatever shard `input` is).
  at::Tensor chunk_forward(const PipelineChunk& chunk, const at::Tensor& input, const at::Tensor& targets,
                           WeightSource& weights, const ForwardOptions& options) const;

  // RoPE's (cos, sin) for T tokens at options.positions (default 0..T-1), on `device`.
  std::pair<at::Tensor, at::Tensor> rope_tables(int64_t T, const ForwardOptions& options, at::Device device) const;

  // One decoder block on x [B, T, H] with the unit's flat weights. A sparse layer records its
  // routing into `routing` (default: the current forward call's record).
  at::Tensor block_forward(int layer, const at::Tensor& flat, const at::Tensor& x, const at::Tensor& cos,
                           const at::Tensor& sin, MoeForwardState* routing = nullptr) const;

  // Model FLOPs per token for a forward + backward at sequence length T (PaLM appendix B, as
  // torchtitan): 6 * N_matmul + 12 * L * Hq * D * T, where N_matmul counts the weights of every
  // matmul (all decoder projections + the output head; embedding lookups and norms do none).
  double flops_per_token(int64_t seq_len) const;

  // Mixture of experts: what the forwards since the last reset routed (metrics, trainer/moe.h;
  // this rank's tokens only).
  // The step resets it before its first forward and reads it after its last.
  MoeStepStats& moe_stats() const { return moe_stats_; }
  // The last chunk_forward()'s routing record (handles: its tensors are the ones its backward
  // nodes read). A pipeline stage keeps it per micro-batch to send its sums forward and, before
  // the backward, to write the call's totals into it (parallelize_pp.h).
  const MoeForwardState& routing() const { return moe_forward_; }
  // [2E + 1] fp64: the record's counts, probability sums and rows (what ForwardOptions::
  // routing_in takes).
  static at::Tensor routing_sums(const MoeForwardState& record);
  // [E + 1] fp64: the whole call's counts and the aux gradient's scale, known to the chunk with
  // the head once its forward is done; set_routing_totals() writes them into an earlier
  // chunk's record so that its backward hands S the same gradient as in one process.
  static at::Tensor routing_totals(const MoeForwardState& record);
  static void set_routing_totals(const MoeForwardState& record, const at::Tensor& totals);

 private:
  std::vector<at::Tensor> views(int unit, const at::Tensor& flat) const;

  ModelSpec spec_;
  // The whole root's layout (what init_unit(0) draws) and which of its parameters this rank
  // keeps, in order (all of them unless keep_chunks() cut the root).
  UnitLayout drawn_root_;
  std::vector<int> root_kept_;
  int root_embed_ = 0, root_norm_ = 1, root_head_ = 2;  // in layout(0); -1: not held
  std::vector<bool> held_;
  bool pipelined_ = false;
  std::vector<UnitLayout> full_layouts_;
  std::vector<UnitLayout> layouts_;
  BlockOps ops_;
  std::vector<int> sparse_slot_;  // per layer: index in moe_stats_.layers, -1 for a dense layer
  // The current forward's routing (a forward call's aux loss) and the step's statistics: mutable
  // because the forward is const (it changes no parameter) but routing is what it observes.
  mutable MoeForwardState moe_forward_;
  mutable MoeStepStats moe_stats_;
};

}  // namespace meshwork::trainer
