#include "core/param_layout.h"

#include <algorithm>

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

int64_t ParamLayout::layer_numel() const { return sum_numel(layer); }
int64_t ParamLayout::root_numel() const { return sum_numel(root); }
int64_t ParamLayout::sharded_layer_numel(int64_t n) const { return sum_sharded(layer, n); }
int64_t ParamLayout::sharded_root_numel(int64_t n) const { return sum_sharded(root, n); }

int64_t ParamLayout::max_tensor_numel() const {
  int64_t m = 0;
  for (const auto& t : layer) m = std::max(m, t.numel());
  for (const auto& t : root) m = std::max(m, t.numel());
  return m;
}

ParamLayout tp_param_layout(const ModelSpec& m, int64_t tp, bool vocab_parallel) {
  tp = std::max<int64_t>(1, tp);
  ParamLayout p;
  p.num_layers = m.num_hidden_layers;
  const int64_t h = m.hidden_size;
  const int64_t q_local = m.q_dim() / tp;
  // kv heads split when tp divides them, else (tp a multiple of kv_heads) one replicated head.
  p.kv_heads_per_rank = std::max<int64_t>(1, m.num_key_value_heads / tp);
  const int64_t kv_local = p.kv_heads_per_rank * m.head_dim;
  const int64_t i_local = m.intermediate_size / tp;

  auto& l = p.layer;
  l.push_back({"input_layernorm.weight", h, 1});
  l.push_back({"self_attn.q_proj.weight", q_local, h});
  l.push_back({"self_attn.k_proj.weight", kv_local, h});
  l.push_back({"self_attn.v_proj.weight", kv_local, h});
  if (m.attention_bias) {
    l.push_back({"self_attn.q_proj.bias", q_local, 1});
    l.push_back({"self_attn.k_proj.bias", kv_local, 1});
    l.push_back({"self_attn.v_proj.bias", kv_local, 1});
  }
  l.push_back({"self_attn.o_proj.weight", h, q_local});
  if (m.o_proj_bias) l.push_back({"self_attn.o_proj.bias", h, 1});
  l.push_back({"post_attention_layernorm.weight", h, 1});
  l.push_back({"mlp.gate_proj.weight", i_local, h});
  l.push_back({"mlp.up_proj.weight", i_local, h});
  l.push_back({"mlp.down_proj.weight", h, i_local});
  if (m.mlp_bias) {
    l.push_back({"mlp.gate_proj.bias", i_local, 1});
    l.push_back({"mlp.up_proj.bias", i_local, 1});
    l.push_back({"mlp.down_proj.bias", h, 1});
  }

  const int64_t v_local = vocab_parallel ? m.vocab_size / tp : m.vocab_size;
  p.root.push_back({"model.embed_tokens.weight", v_local, h});
  p.root.push_back({"model.norm.weight", h, 1});
  if (!m.tie_word_embeddings) p.root.push_back({"lm_head.weight", v_local, h});
  return p;
}

}  // namespace meshwork
