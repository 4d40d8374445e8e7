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
//                       q_norm, k_norm model.layers.l.self_attn.{q,k}_norm.weight (Qwen3, OLMoE)
//   sparse block l      router     model.layers.l.mlp.gate.weight               [E, H]
//   (instead of the     expert_gate, expert_up, expert_down  [E, Ie, H] / [E, H, Ie], one HF
//   dense MLP)            tensor per expert e: model.layers.l.mlp.experts.e.{gate,up,down}_proj.weight
//                       Mixtral: block_sparse_moe.gate.weight and block_sparse_moe.experts.e.{w1,w3,w2}.weight
//
// meshtrain stacks a layer's experts into one tensor per projection ([E, ...], expert e's rows
// contiguous), so such a parameter is E HF tensors, one after the other (hf_tensor_pieces).
//
// Layouts agree element for element: an HF Linear weight is [out, in] row-major, as meshtrain's,
// and HF's q/k weights are already in the rotate_half order meshtrain's RoPE uses (the
// conversion scripts permute Meta's interleaved weights once, when writing the HF checkpoint),
// so no tensor is transposed or permuted on the way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
    {"q_norm", "self_attn.q_norm.weight"},
    {"k_norm", "self_attn.k_norm.weight"},
    {"router", "mlp.gate.weight"},
};

// Per expert, after "model.layers.<l>.mlp.experts.<e>." (Mixtral: block_sparse_moe.experts.<e>.).
struct ExpertName {
  std::string_view param, hf, mixtral;
};
inline constexpr ExpertName kExpertWeightNames[] = {
    {"expert_gate", "gate_proj.weight", "w1.weight"},
    {"expert_up", "up_proj.weight", "w3.weight"},
    {"expert_down", "down_proj.weight", "w2.weight"},
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

// The HF tensors behind meshtrain parameter `param` of `unit` with full shape `shape`, in the
// order their elements follow one another in meshtrain's tensor: one for most parameters, E for
// a stacked expert tensor (each then shaped shape[1:]). Empty if the name is unknown.
struct HfPiece {
  std::string name;
  std::vector<int64_t> shape;
};
inline std::vector<HfPiece> hf_tensor_pieces(std::string_view model_type, int unit, std::string_view param,
                                             const std::vector<int64_t>& shape) {
  const bool mixtral = model_type == "mixtral";
  if (unit > 0) {
    const std::string layer = "model.layers." + std::to_string(unit - 1) + ".";
    if (param == "router") return {{layer + (mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight"), shape}};
    for (const ExpertName& w : kExpertWeightNames) {
      if (w.param != param) continue;
      std::vector<HfPiece> pieces;
      const std::vector<int64_t> one(shape.begin() + 1, shape.end());
      for (int64_t e = 0; e < shape[0]; ++e)
        pieces.push_back({layer + (mixtral ? "block_sparse_moe.experts." : "mlp.experts.") + std::to_string(e) + "." +
                              std::string(mixtral ? w.mixtral : w.hf),
                          one});
      return pieces;
    }
  }
  std::string name = hf_weight_name(unit, param);
  if (name.empty()) return {};
  return {{name, shape}};
}

}  // namespace meshwork::trainer::hf
