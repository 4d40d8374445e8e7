// The one table between meshtrain's parameters and Hugging Face tensor names (Llama, Mistral and
// Qwen2 share these names: LlamaForCausalLM's state dict). The checkpoint loader reads by it;
// an exporter writes by it. No LibTorch here.
//
//   unit 0 (root)       embed      model.embed_tokens.weight                 [V, H]
//                       norm       model.norm.weight                          [H]
//                       head       lm_head.weight (absent when tied)          [V, H]
//   unit 1 + l (block)  attn_norm  model.layers.l.input_layernorm.weight      [H]
//                       wq, wk, wv model.layers.l.self_attn.{q,k,v}_proj.weight [Hq D | Hkv D, H]
//                       wo         model.layers.l.self_attn.o_proj.weight     [H, Hq D]
//                       mlp_norm   model.layers.l.post_attention_layernorm.weight [H]
//                       w_gate, w_up, w_down  model.layers.l.mlp.{gate,up,down}_proj.weight
//                       bq, bk, bv model.layers.l.self_attn.{q,k,v}_proj.bias (Qwen2)
//
// Layouts agree element for element: an HF Linear weight is [out, in] row-major, as meshtrain's,
// and HF's q/k weights are already in the rotate_half order meshtrain's RoPE uses (the
// conversion scripts permute Meta's interleaved weights once, when writing the HF checkpoint),
// so no tensor is transposed or permuted on the way.
#pragma once

#include <string>
#include <string_view>

namespace meshwork::trainer::hf {

struct WeightName {
  std::string_view param;  // meshtrain's name in the unit's layout
  std::string_view hf;     // the HF name; for block units after "model.layers.<l>."
};

inline constexpr WeightName kRootWeightNames[] = {
    {"embed", "model.embed_tokens.weight"},
    {"norm", "model.norm.weight"},
    {"head", "lm_head.weight"},
};

inline constexpr WeightName kBlockWeightNames[] = {
    {"attn_norm", "input_layernorm.weight"},
    {"wq", "self_attn.q_proj.weight"},
    {"wk", "self_attn.k_proj.weight"},
    {"wv", "self_attn.v_proj.weight"},
    {"wo", "self_attn.o_proj.weight"},
    {"mlp_norm", "post_attention_layernorm.weight"},
    {"w_gate", "mlp.gate_proj.weight"},
    {"w_up", "mlp.up_proj.weight"},
    {"w_down", "mlp.down_proj.weight"},
    {"bq", "self_attn.q_proj.bias"},
    {"bk", "self_attn.k_proj.bias"},
    {"bv", "self_attn.v_proj.bias"},
};

// The HF name of meshtrain parameter `param` of `unit` (0 root, 1 + l block l); "" if unknown.
inline std::string hf_weight_name(int unit, std::string_view param) {
  if (unit == 0) {
    for (const WeightName& w : kRootWeightNames)
      if (w.param == param) return std::string(w.hf);
    return {};
  }
  for (const WeightName& w : kBlockWeightNames)
    if (w.param == param) return "model.layers." + std::to_string(unit - 1) + "." + std::string(w.hf);
  return {};
}

}  // namespace meshwork::trainer::hf
