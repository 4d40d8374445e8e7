// The parameter tensors one tensor-parallel rank holds, tensor by tensor, so that memory and
// communication estimates can count FSDP's per-tensor dim-0 sharding (with its padding) exactly.
//
// Megatron-style tp: q/k/v and gate/up are split column-wise (their output rows, dim 0
// of a torch Linear weight [out, in]), o_proj and down_proj row-wise (their input columns); norms
// and the o_proj / down_proj biases are replicated; embedding and lm_head are split over the
// vocabulary when vocab-parallel. With tp > kv_heads (tp % kv_heads == 0) each rank holds one kv
// head (a replica).
//
// Mixture of experts: `layer` holds what every decoder layer has (norms, attention); each sparse
// layer adds the router (replicated over tp) and this rank's experts, each dense layer of an MoE
// model its MLP. With ep > 1 a rank holds num_experts / ep whole experts (torchtitan's ep borrows
// the tp ranks: expert tensor parallel is 1) and FSDP shards them over efsdp = n * tp / ep
// (core/mesh.h) instead of the dense group n = dp_shard * cp; with ep = 1 every tp rank holds
// every expert whole (as meshtrain runs them: docs/moe.md) and FSDP shards them over n.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model_spec.h"

namespace meshwork {

struct ParamTensor {
  std::string name;  // HF name without the layer prefix, e.g. "self_attn.q_proj.weight"
  int64_t rows = 0;  // dim 0 on this tp rank (the dim FSDP shards)
  int64_t cols = 1;  // product of the other dims
  int64_t numel() const { return rows * cols; }
  // Elements per rank after FSDP2 dim-0 sharding over n ranks: ceil(rows / n) * cols
  // (FSDP2 pads dim 0 to a multiple of n; shards are equal).
  int64_t sharded_numel(int64_t n) const { return (rows + n - 1) / n * cols; }
};

struct ParamLayout {
  std::vector<ParamTensor> layer;  // one decoder layer (every layer alike)
  std::vector<ParamTensor> root;   // embed_tokens, final norm, lm_head (absent when tied)
  int64_t num_layers = 0;
  int64_t kv_heads_per_rank = 0;
  // Mixture of experts (empty, 0 for a dense model): per sparse layer, per dense layer.
  std::vector<ParamTensor> router, experts, dense_mlp;
  int64_t sparse_layers = 0, dense_mlp_layers = 0;
  int64_t tp = 1, ep = 1;

  // The largest decoder layer (what FSDP gathers for one unit): `layer` plus its MLP part.
  int64_t layer_numel() const;
  int64_t root_numel() const;
  // Expert elements of this rank over all its sparse layers (before FSDP).
  int64_t expert_numel() const;
  int64_t total_numel() const;
  // Largest single tensor (the optimizer step's temporaries are this big).
  int64_t max_tensor_numel() const;
  // The ranks FSDP shards the experts over when the dense group is n: efsdp = n * tp / ep with
  // ep > 1, else n.
  int64_t expert_shards(int64_t n) const { return ep > 1 ? std::max<int64_t>(1, n * tp / ep) : n; }
  // Elements per rank when every tensor is FSDP-sharded over n ranks (experts over
  // expert_shards(n)).
  int64_t sharded_layer_numel(int64_t n) const;
  int64_t sharded_root_numel(int64_t n) const;
  int64_t sharded_expert_numel(int64_t n) const;
  int64_t sharded_total_numel(int64_t n) const;
};

// tp, ep must be >= 1; divisibility is validate_shape's job (sizes here round down if violated).
ParamLayout tp_param_layout(const ModelSpec& model, int64_t tp, bool vocab_parallel = true, int64_t ep = 1);

// What one pipeline stage holds of `full`: `layers` decoder layers, the embedding when it runs the
// first chunk, the final norm and lm_head when it runs the last (meshtrain keeps only those root
// tensors on a stage). pp = 1: the stage holding everything is `full` itself.
ParamLayout stage_param_layout(const ParamLayout& full, int64_t layers, bool embedding, bool head);

}  // namespace meshwork
