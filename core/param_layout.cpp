#include "core/param_layout.h"

#include <algorithm>
#include <initializer_list>
#include <string>

namespace meshwork {

namespace {

int64_t sum_numel(const std::vector<ParamTensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}

int64_t sum_sharded(const std::vector<ParamTensor>& ts, int64_t shards) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.sharded_numel(shards);
  return n;
}

}  // namespace

int64_t ParamLayout::layer_numel() const {
  const int64_t sparse = sparse_layers > 0 ? sum_numel(router) + sum_numel(experts) : 0;
  const int64_t dense = dense_mlp_layers > 0 ? sum_numel(dense_mlp) : 0;
  return sum_numel(layer) + std::max(sparse, dense);
}
int64_t ParamLayout::root_numel() const { return sum_numel(root); }
int64_t ParamLayout::expert_numel() const { return sparse_layers * sum_numel(experts); }
int64_t ParamLayout::total_numel() const {
  return num_layers * sum_numel(layer) + sparse_layers * (sum_numel(router) + sum_numel(experts)) +
         dense_mlp_layers * sum_numel(dense_mlp) + root_numel();
}
int64_t ParamLayout::sharded_layer_numel(int64_t n) const {
  const int64_t sparse =
      sparse_layers > 0 ? sum_sharded(router, n) + sum_sharded(experts, expert_shards(n)) : 0;
  const int64_t dense = dense_mlp_layers > 0 ? sum_sharded(dense_mlp, n) : 0;
  return sum_sharded(layer, n) + std::max(sparse, dense);
}
int64_t ParamLayout::sharded_root_numel(int64_t n) const { return sum_sharded(root, n); }
int64_t ParamLayout::sharded_expert_numel(int64_t n) const {
  return sparse_layers * sum_sharded(experts, expert_shards(n));
}
int64_t ParamLayout::sharded_total_numel(int64_t n) const {
  return num_layers * sum_sharded(layer, n) + sparse_layers * sum_sharded(router, n) + sharded_expert_numel(n) +
         dense_mlp_layers * sum_sharded(dense_mlp, n) + sharded_root_numel(n);
}

int64_t ParamLayout::max_tensor_numel() const {
  int64_t m = 0;
  for (const auto* part : {&layer, &root, &router, &experts, &dense_mlp})
    for (const auto& t : *part) m = std::max(m, t.numel());
  return m;
}

ParamLayout tp_param_layout(const ModelSpec& m, int64_t tp, bool vocab_parallel, int64_t ep) {
  tp = std::max<int64_t>(1, tp);
  ep = std::max<int64_t>(1, ep);
  ParamLayout p;
  p.tp = tp;
  p.ep = ep;
  p.num_layers = m.num_hidden_layers;
  const int64_t h = m.hidden_size;
  const int64_t q_local = m.q_dim() / tp;
  // kv heads split when tp divides them, else (tp a multiple of kv_heads) one replicated head.
  p.kv_heads_per_rank = std::max<int64_t>(1, m.num_key_value_heads / tp);
  const int64_t kv_local = p.kv_heads_per_rank * m.head_dim;
  const int64_t i_local = m.intermediate_size / tp;

  // Linear layers side by side: their weights [out, in], then their biases [out] when the model
  // has them (the Hugging Face checkpoint order).
  struct Linear {
    const char* name;
    int64_t out, in;
  };
  auto linears_into = [](std::vector<ParamTensor>& l, std::initializer_list<Linear> group, bool bias) {
    for (const Linear& g : group) l.push_back({std::string(g.name) + ".weight", g.out, g.in});
    if (bias)
      for (const Linear& g : group) l.push_back({std::string(g.name) + ".bias", g.out, 1});
  };
  auto& l = p.layer;
  auto linears = [&](std::initializer_list<Linear> group, bool bias) { linears_into(l, group, bias); };
  l.push_back({"input_layernorm.weight", h, 1});
  linears({{"self_attn.q_proj", q_local, h}, {"self_attn.k_proj", kv_local, h},
           {"self_attn.v_proj", kv_local, h}},
          m.attention_bias);
  linears({{"self_attn.o_proj", h, q_local}}, m.o_proj_bias);
  // q/k RMSNorms, replicated over tp: per head (Qwen3: head_dim) or over the whole projection
  // (OLMoE: q and k widths).
  if (m.qk_norm == QkNorm::per_head) {
    l.push_back({"self_attn.q_norm.weight", m.head_dim, 1});
    l.push_back({"self_attn.k_norm.weight", m.head_dim, 1});
  } else if (m.qk_norm == QkNorm::whole_projection) {
    l.push_back({"self_attn.q_norm.weight", m.q_dim(), 1});
    l.push_back({"self_attn.k_norm.weight", m.kv_dim(), 1});
  }
  l.push_back({"post_attention_layernorm.weight", h, 1});
  if (!m.is_moe()) {
    linears({{"mlp.gate_proj", i_local, h}, {"mlp.up_proj", i_local, h}, {"mlp.down_proj", h, i_local}},
            m.mlp_bias);
  } else {
    p.sparse_layers = m.sparse_layer_count();
    p.dense_mlp_layers = m.num_hidden_layers - p.sparse_layers;
    if (p.dense_mlp_layers > 0)
      linears_into(p.dense_mlp,
                   {{"mlp.gate_proj", i_local, h}, {"mlp.up_proj", i_local, h}, {"mlp.down_proj", h, i_local}},
                   m.mlp_bias);
    p.router.push_back({"mlp.gate.weight", m.moe.num_experts, h});
    // The experts as torchtitan's grouped tensors [experts, out, in]: ep > 1 keeps
    // num_experts / ep whole experts; ep = 1 keeps every expert whole on every tp rank, as
    // meshtrain runs them (docs/moe.md: each tp rank routes its own sequence-parallel rows
    // through whole experts rather than splitting each small expert GEMM). FSDP shards dim 0, or
    // dim 1 when there are fewer local experts than shards (torchtitan's shard_placement_fn):
    // rows = experts x out counts either with its padding to a whole row.
    const int64_t local_experts = ep > 1 ? m.moe.num_experts / ep : m.moe.num_experts;
    const int64_t ie = m.moe.expert_intermediate_size;
    p.experts.push_back({"mlp.experts.gate_proj", local_experts * ie, h});
    p.experts.push_back({"mlp.experts.up_proj", local_experts * ie, h});
    p.experts.push_back({"mlp.experts.down_proj", local_experts * h, ie});
  }

  const int64_t v_local = vocab_parallel ? m.vocab_size / tp : m.vocab_size;
  p.root.push_back({"model.embed_tokens.weight", v_local, h});
  p.root.push_back({"model.norm.weight", h, 1});
  if (!m.tie_word_embeddings) p.root.push_back({"lm_head.weight", v_local, h});
  return p;
}

ParamLayout stage_param_layout(const ParamLayout& full, int64_t layers, bool embedding, bool head) {
  ParamLayout p = full;
  p.num_layers = layers;
  if (full.num_layers > 0 && full.sparse_layers > 0) {
    // The stage's sparse layers in the model's proportion (every layer sparse: all of them).
    p.sparse_layers = (layers * full.sparse_layers + full.num_layers / 2) / full.num_layers;
    p.dense_mlp_layers = layers - p.sparse_layers;
  }
  p.root.clear();
  for (const ParamTensor& t : full.root) {
    const bool is_embedding = t.name == "model.embed_tokens.weight";
    if (is_embedding ? embedding : head) p.root.push_back(t);
  }
  return p;
}

}  // namespace meshwork
