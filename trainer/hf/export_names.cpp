#include "trainer/hf/export_names.h"

#include <array>
#include <utility>

namespace meshwork::trainer::hf {

std::string hf_weight_name(int unit, std::string_view param) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 3> root = {{
      {"embed", "model.embed_tokens.weight"},
      {"norm", "model.norm.weight"},
      {"head", "lm_head.weight"},
  }};
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> block = {{
      {"attn_norm", "input_layernorm.weight"},
      {"wq", "self_attn.q_proj.weight"},
      {"wk", "self_attn.k_proj.weight"},
      {"wv", "self_attn.v_proj.weight"},
      {"wo", "self_attn.o_proj.weight"},
      {"bq", "self_attn.q_proj.bias"},
      {"bk", "self_attn.k_proj.bias"},
      {"bv", "self_attn.v_proj.bias"},
      {"mlp_norm", "post_attention_layernorm.weight"},
      {"w_gate", "mlp.gate_proj.weight"},
      {"w_up", "mlp.up_proj.weight"},
      {"w_down", "mlp.down_proj.weight"},
  }};
  if (unit < 0) return {};
  if (unit == 0) {
    for (const auto& [ours, theirs] : root)
      if (ours == param) return std::string(theirs);
    return {};
  }
  for (const auto& [ours, theirs] : block)
    if (ours == param) return "model.layers." + std::to_string(unit - 1) + "." + std::string(theirs);
  return {};
}

}  // namespace meshwork::trainer::hf
