// Model specs: the architecture numbers of a Llama-style decoder (Llama, Mistral, Qwen2, Qwen3
// families) and of its mixture-of-experts relatives (Qwen3-MoE, Mixtral, OLMoE), read from a
// Hugging Face config.json or a bundled preset (resources/models/<name>.json). Both the estimator
// and meshtrain build from these; parameter counts are exact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace meshwork {

// RoPE frequency scaling (config.json "rope_scaling", v5 "rope_parameters"): "default" (none) or
// Llama 3.x's "llama3" rewrite of the inverse frequencies (core/rope.h). Any other type is refused.
struct RopeScaling {
  std::string type = "default";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  bool operator==(const RopeScaling&) const = default;
};

// RMSNorm of queries and keys before RoPE. Qwen3 (and Qwen3-MoE) normalise each head's head_dim
// slice with one [head_dim] weight shared by all heads; OLMoE normalises the whole q and k
// projections ([q_dim] and [kv_dim] weights), so under tp the variance needs the whole row.
enum class QkNorm { none, per_head, whole_projection };

// Mixture of experts. The MLP of a sparse layer is `num_experts` SwiGLU experts of width
// `expert_intermediate_size` and a router (a bias-free Linear hidden -> num_experts). Each token
// goes to the `experts_per_token` experts of highest softmax probability, their outputs weighted by
// those probabilities, renormalised to sum to 1 when `norm_topk_prob` (Mixtral always does). No
// token is dropped. The load-balancing loss (transformers' load_balancing_loss_func) is added to
// the language-model loss times `router_aux_loss_coef`.
struct MoeSpec {
  int64_t num_experts = 0;  // 0: a dense model
  int64_t experts_per_token = 0;
  int64_t expert_intermediate_size = 0;
  bool norm_topk_prob = false;
  double router_aux_loss_coef = 0.0;
  // transformers adds the auxiliary loss to the loss only when config.json's output_router_logits
  // is true (published configs say false); meshtrain follows the config, so losses compare.
  bool output_router_logits = false;
  // Qwen3-MoE's choice of sparse layers: layer i is sparse unless it is in mlp_only_layers or
  // (i + 1) % decoder_sparse_step != 0; the others keep a dense MLP of intermediate_size.
  // Mixtral and OLMoE: every layer is sparse (step 1, no list).
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  bool operator==(const MoeSpec&) const = default;
};

struct ModelSpec {
  std::string name;          // preset name or file stem
  // HF model_type: "llama" | "mistral" | "qwen2" | "qwen3" (dense); "qwen3_moe" | "mixtral" |
  // "olmoe" (mixture of experts). Checkpoint tensor names follow it: Mixtral's experts are
  // block_sparse_moe.experts.E.{w1,w3,w2} under block_sparse_moe.gate, the others'
  // mlp.experts.E.{gate,up,down}_proj under mlp.gate.
  std::string architecture;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_attention_heads unless the config says otherwise
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry biases (Qwen2 always does)
  bool o_proj_bias = false;     // o_proj carries a bias (Llama's attention_bias covers q,k,v,o)
  bool mlp_bias = false;        // gate/up/down carry biases (Llama's mlp_bias)
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-5;
  std::string dtype;  // the checkpoint's dtype as config.json says ("bfloat16", ...); "" if unsaid
  // Sliding-window attention as config.json turns it on: the window (tokens a query attends back
  // to) of the layers from sliding_window_from_layer on; 0: every layer attends to the whole
  // causal prefix. meshtrain computes full causal attention, so core's validation refuses a
  // window shorter than the trained seq_len (the model would differ); a longer one changes
  // nothing and is kept for the export's config.json.
  int64_t sliding_window = 0;
  int64_t sliding_window_from_layer = 0;
  std::string sliding_window_field;  // the key that turned it on ("sliding_window", "use_sliding_window", "layer_types")
  QkNorm qk_norm = QkNorm::none;
  MoeSpec moe;

  // Exact number of parameters (embedding, per-layer attention/MLP/norm weights and biases,
  // router and every expert of the sparse layers, final norm, untied output head).
  int64_t parameter_count() const;
  // The parameters one token's forward pass uses: every expert but its experts_per_token ones left
  // out of each sparse layer (the "active" count MoE model cards quote). parameter_count() for a
  // dense model.
  int64_t active_parameter_count() const;
  // Parameters of one dense decoder layer (attention, norms and an MLP of intermediate_size).
  int64_t layer_parameter_count() const;
  // Parameters of one sparse layer: attention, norms, router and all num_experts experts.
  int64_t sparse_layer_parameter_count() const;
  int64_t attention_parameter_count() const;  // q, k, v, o weights, their biases, the q/k norms
  int64_t expert_parameter_count() const;     // one expert: gate, up, down of expert_intermediate_size
  int64_t router_parameter_count() const;     // num_experts x hidden
  bool is_moe() const { return moe.num_experts > 0; }
  bool layer_is_sparse(int64_t layer) const;
  int64_t sparse_layer_count() const;
  // Parameters of the token embedding (vocab x hidden) and of the untied output head (0 if tied).
  int64_t embedding_parameter_count() const;
  int64_t lm_head_parameter_count() const;
  // q width (heads * head_dim) and k/v width (kv_heads * head_dim).
  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
};

// An HF-style config.json for the spec (model_type, architectures and every field above), which
// model_spec_from_json reads back to an equal spec.
nlohmann::json model_spec_to_json(const ModelSpec& spec);

// Reads a Hugging Face config.json object; other keys are ignored. Both transformers v4 keys
// (rope_theta, rope_scaling, torch_dtype) and v5 keys (rope_parameters holding rope_theta, dtype)
// are read. A missing or inconsistent required field, an unsupported architecture or a RoPE
// scaling type meshtrain does not implement is an Error naming the field.
Result<ModelSpec> model_spec_from_json(const nlohmann::json& config, std::string name);
Result<ModelSpec> load_model_spec_file(const std::filesystem::path& path);
// A preset name (see preset_names()), a path to a config.json, or a Hugging Face model directory
// (one holding config.json, with or without weights).
Result<ModelSpec> load_model_spec(std::string_view name_or_path);
std::vector<std::string> preset_names();
// The directory holding the model's weights when `model` (a run config's "model") names a
// Hugging Face directory, or a config.json inside one, with model.safetensors or
// model.safetensors.index.json; nullopt otherwise (a preset, an inline config, no weights).
std::optional<std::filesystem::path> hf_weights_dir(const nlohmann::json& model);
// The "model" entry of a run config: a preset name / path (string) or an inline config (object).
Result<ModelSpec> model_spec_from_run_model(const nlohmann::json& model);
// Where presets are read from: <resource_dir()>/models (core/resource_dir.h: the environment,
// the install tree beside the executable, or the source tree).
std::filesystem::path preset_dir();

}  // namespace meshwork
