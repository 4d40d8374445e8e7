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

  // Linear layers side by side: their weights [out, in], then their biases [out] when the model
  // has them (the Hugging Face checkpoint order).
  struct Linear {
    const char* name;
    int64_t out, in;
  };
  auto& l = p.layer;
  auto linears = [&l](std::initializer_list<Linear> group, bool bias) {
    for (const Linear& g : group) l.push_back({std::string(g.name) + ".weight", g.out, g.in});
    if (bias)
      for (const Linear& g : group) l.push_back({std::string(g.name) + ".bias", g.out, 1});
  };
  l.push_back({"input_layernorm.weight", h, 1});
  linears({{"self_attn.q_proj", q_local, h}, {"self_attn.k_proj", kv_local, h},
           {"self_attn.v_proj", kv_local, h}},
          m.attention_bias);
  linears({{"self_attn.o_proj", h, q_local}}, m.o_proj_bias);
  l.push_back({"post_attention_layernorm.weight", h, 1});
  linears({{"mlp.gate_proj", i_local, h}, {"mlp.up_proj", i_local, h}, {"mlp.down_proj", h, i_local}},
          m.mlp_bias);

  const int64_t v_local = vocab_parallel ? m.vocab_size / tp : m.vocab_size;
  p.root.push_back({"model.embed_tokens.weight", v_local, h});
  p.root.push_back({"model.norm.weight", h, 1});
  if (!m.tie_word_embeddings) p.root.push_back({"lm_head.weight", v_local, h});
  return p;
}

ParamLayout stage_param_layout(const ParamLayout& full, int64_t layers, bool embedding, bool head) {
  ParamLayout p = full;
  p.num_layers = layers;
  p.root.clear();
  for (const ParamTensor& t : full.root) {
    const bool is_embedding = t.name == "model.embed_tokens.weight";
    if (is_embedding ? embedding : head) p.root.push_back(t);
  }
  return p;
}

}  // namespace meshwork
