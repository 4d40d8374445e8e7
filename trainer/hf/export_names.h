// Hugging Face parameter names of meshtrain's parameters (Llama / Mistral / Qwen2 layout), for
// the exporter. meshtrain's units (trainer/model.h): unit 0 holds embed, norm and head; unit
// 1 + l holds decoder block l.
//
//   meshtrain            HF
//   embed                model.embed_tokens.weight
//   norm                 model.norm.weight
//   head                 lm_head.weight                 (absent when tied)
//   attn_norm            model.layers.<l>.input_layernorm.weight
//   wq / wk / wv / wo    model.layers.<l>.self_attn.{q,k,v,o}_proj.weight
//   bq / bk / bv         model.layers.<l>.self_attn.{q,k,v}_proj.bias
//   mlp_norm             model.layers.<l>.post_attention_layernorm.weight
//   w_gate/w_up/w_down   model.layers.<l>.mlp.{gate,up,down}_proj.weight
//
// Shapes agree as they are (torch Linear [out, in]) and meshtrain's RoPE is HF's rotate_half
// form, so no tensor needs permuting. The loader keeps the same table in the other direction;
// when both exist in one place this file should become a call into that table.
#pragma once

#include <string>
#include <string_view>

namespace meshwork::trainer::hf {

// The HF name of parameter `param` of unit `unit`; empty when the name is not in the table.
std::string hf_weight_name(int unit, std::string_view param);

}  // namespace meshwork::trainer::hf
