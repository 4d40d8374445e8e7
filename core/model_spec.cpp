// Past ~600 lines on purpose: reading config.json is one rule per field for seven model families
// (model_type, their defaults, their sliding-window and q/k-norm and expert keys), and keeping
// every family's reading of a field in one place is what makes a difference between them visible.
#include "core/model_spec.h"
#include "core/resource_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <system_error>

namespace meshwork {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Parameter counts. A Llama-style decoder layer (HF LlamaDecoderLayer / MistralDecoderLayer /
// Qwen2DecoderLayer) holds, with H = hidden, d = head_dim, nh = heads, nkv = kv heads, I = MLP:
//   q_proj  H x (nh*d)   [+ nh*d bias]      k_proj, v_proj  H x (nkv*d)  [+ nkv*d bias each]
//   o_proj  (nh*d) x H   [+ H bias]         gate_proj, up_proj H x I, down_proj I x H [+ 2I + H]
//   input_layernorm, post_attention_layernorm: H weights each (RMSNorm has no bias)
// The model adds the embedding V x H, a final RMSNorm H and an lm_head V x H unless tied.
// Check: Llama-3.1-8B = 2*128256*4096 + 32*218,112,000 + 4096 = 8,030,261,248.
// ---------------------------------------------------------------------------------------------
int64_t ModelSpec::attention_parameter_count() const {
  const int64_t h = hidden_size;
  int64_t attn = h * q_dim() + 2 * h * kv_dim() + q_dim() * h;
  if (attention_bias) attn += q_dim() + 2 * kv_dim();
  if (o_proj_bias) attn += h;
  if (qk_norm == QkNorm::per_head) attn += 2 * head_dim;
  if (qk_norm == QkNorm::whole_projection) attn += q_dim() + kv_dim();
  return attn;
}

int64_t ModelSpec::layer_parameter_count() const {
  const int64_t h = hidden_size;
  int64_t mlp = 3 * h * intermediate_size;
  if (mlp_bias) mlp += 2 * intermediate_size + h;
  const int64_t norms = 2 * h;
  return attention_parameter_count() + mlp + norms;
}

// A sparse layer (Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock, OlmoeSparseMoeBlock): the router
// E x H and E experts of 3 x H x I_e, no biases. Check: Qwen3-30B-A3B = 2*151936*2048 + 2048 +
// 48*(attention 2048*4096*2 + 2048*512*2 + 2*128, norms 2*2048, router 128*2048,
// experts 128*3*2048*768) = 30,532,122,624, as transformers counts it.
int64_t ModelSpec::expert_parameter_count() const { return 3 * hidden_size * moe.expert_intermediate_size; }
int64_t ModelSpec::router_parameter_count() const { return moe.num_experts * hidden_size; }

int64_t ModelSpec::sparse_layer_parameter_count() const {
  return attention_parameter_count() + 2 * hidden_size + router_parameter_count() +
         moe.num_experts * expert_parameter_count();
}

bool ModelSpec::layer_is_sparse(int64_t layer) const {
  if (!is_moe()) return false;
  if (std::find(moe.mlp_only_layers.begin(), moe.mlp_only_layers.end(), layer) != moe.mlp_only_layers.end())
    return false;
  return (layer + 1) % moe.decoder_sparse_step == 0;
}

int64_t ModelSpec::sparse_layer_count() const {
  int64_t n = 0;
  for (int64_t l = 0; l < num_hidden_layers; ++l) n += layer_is_sparse(l) ? 1 : 0;
  return n;
}

int64_t ModelSpec::embedding_parameter_count() const { return vocab_size * hidden_size; }

int64_t ModelSpec::lm_head_parameter_count() const {
  return tie_word_embeddings ? 0 : vocab_size * hidden_size;
}

int64_t ModelSpec::parameter_count() const {
  const int64_t sparse = sparse_layer_count();
  return embedding_parameter_count() + (num_hidden_layers - sparse) * layer_parameter_count() +
         sparse * sparse_layer_parameter_count() + hidden_size /* final norm */ +
         lm_head_parameter_count();
}

int64_t ModelSpec::active_parameter_count() const {
  return parameter_count() -
         sparse_layer_count() * (moe.num_experts - moe.experts_per_token) * expert_parameter_count();
}

// ---------------------------------------------------------------------------------------------
// Reading config.json
// ---------------------------------------------------------------------------------------------
namespace {

constexpr const char* kSupported =
    "one of llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, olmoe (LlamaForCausalLM, "
    "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, "
    "MixtralForCausalLM, OlmoeForCausalLM)";

// model_type -> the class name config.json's "architectures" holds.
constexpr std::pair<const char*, const char*> kArchitectures[] = {
    {"llama", "LlamaForCausalLM"},     {"mistral", "MistralForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},     {"qwen3", "Qwen3ForCausalLM"},
    {"qwen3_moe", "Qwen3MoeForCausalLM"}, {"mixtral", "MixtralForCausalLM"},
    {"olmoe", "OlmoeForCausalLM"},
};

std::string field_name(const std::string& key) { return "model." + key; }

std::string dump_value(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// An integer field: a JSON integer, or a float with an integral value (some exporters write 4096.0).
Result<std::optional<int64_t>> get_int(const nlohmann::json& cfg, const std::string& key,
                                       bool required, int64_t min_value) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) {
    if (required)
      return Error{field_name(key), "missing", "a whole number >= " + std::to_string(min_value)};
    return std::optional<int64_t>{};
  }
  int64_t v = 0;
  if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else if (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>() &&
             std::abs(it->get<double>()) < 9e15) {
    v = static_cast<int64_t>(it->get<double>());
  } else {
    return Error{field_name(key), dump_value(*it),
                 "a whole number >= " + std::to_string(min_value)};
  }
  if (v < min_value)
    return Error{field_name(key), std::to_string(v),
                 "a whole number >= " + std::to_string(min_value)};
  return std::optional<int64_t>{v};
}

Result<std::optional<bool>> get_bool(const nlohmann::json& cfg, const std::string& key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::optional<bool>{};
  if (!it->is_boolean()) return Error{field_name(key), dump_value(*it), "true or false"};
  return std::optional<bool>{it->get<bool>()};
}

Result<std::optional<double>> get_double(const nlohmann::json& cfg, const std::string& key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::optional<double>{};
  if (!it->is_number() || !(it->get<double>() > 0))
    return Error{field_name(key), dump_value(*it), "a positive number"};
  return std::optional<double>{it->get<double>()};
}

// The model_type (kArchitectures' first column) from model_type, else from architectures[0].
Result<std::string> detect_architecture(const nlohmann::json& cfg) {
  if (auto it = cfg.find("model_type"); it != cfg.end() && !it->is_null()) {
    const std::string mt = it->is_string() ? it->get<std::string>() : it->dump();
    for (const auto& [type, cls] : kArchitectures)
      if (mt == type) return mt;
    return Error{"model.model_type", mt, kSupported};
  }
  if (auto it = cfg.find("architectures"); it != cfg.end() && it->is_array() && !it->empty()) {
    const std::string a = (*it)[0].is_string() ? (*it)[0].get<std::string>() : (*it)[0].dump();
    for (const auto& [type, cls] : kArchitectures)
      if (a == cls) return std::string(type);
    return Error{"model.architectures", a, kSupported};
  }
  return Error{"model.model_type", "missing", kSupported};
}

#define MW_TRY(var, expr)                       \
  auto var##_r = (expr);                        \
  if (!var##_r.ok()) return var##_r.error();    \
  auto var = std::move(var##_r).value()

// RoPE: v5 writes "rope_parameters": {"rope_type", "rope_theta", "factor", ...}; v4 writes a
// top-level "rope_theta" and "rope_scaling": null | {"rope_type" (or the older "type"), ...}.
// Returns (theta, scaling). Only "default" and "llama3" are implemented (core/rope.h); every
// other type (linear, dynamic, yarn, longrope, ...) changes the positions' angles, so running it
// as plain RoPE would silently train a different model: refused by name.
Result<std::pair<double, RopeScaling>> read_rope(const nlohmann::json& cfg, double theta) {
  RopeScaling r;
  std::string key = "rope_parameters";
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) {
    key = "rope_scaling";
    it = cfg.find(key);
  }
  if (it == cfg.end() || it->is_null()) return std::pair{theta, r};
  if (!it->is_object()) return Error{field_name(key), dump_value(*it), "an object or null"};
  const nlohmann::json& p = *it;
  const std::string pre = key + ".";
  if (auto t = p.find("rope_theta"); t != p.end() && !t->is_null()) {
    if (!t->is_number() || !(t->get<double>() > 0))
      return Error{field_name(pre + "rope_theta"), dump_value(*t), "a positive number"};
    theta = t->get<double>();
  }
  std::string type_key = p.contains("rope_type") ? "rope_type" : "type";
  if (auto t = p.find(type_key); t != p.end() && !t->is_null()) r.type = dump_value(*t);
  if (r.type == "default") return std::pair{theta, r};
  if (r.type != "llama3")
    return Error{field_name(pre + type_key), r.type,
                 "default or llama3 (the RoPE scalings meshtrain implements)"};
  for (auto [name, out] : {std::pair{"factor", &r.factor}, std::pair{"low_freq_factor", &r.low_freq_factor},
                           std::pair{"high_freq_factor", &r.high_freq_factor}}) {
    auto v = get_double(p, name);
    if (!v.ok() || !*v)
      return Error{field_name(pre + name), v.ok() ? "missing" : v.error().value,
                   "a positive number (llama3 RoPE scaling)"};
    *out = **v;
  }
  auto orig = get_int(p, "original_max_position_embeddings", true, 1);
  if (!orig.ok()) {
    Error e = orig.error();
    e.field = field_name(pre + "original_max_position_embeddings");
    return e;
  }
  r.original_max_position_embeddings = **orig;
  if (!(r.high_freq_factor > r.low_freq_factor))
    return Error{field_name(pre + "high_freq_factor"), dump_value(p.at("high_freq_factor")),
                 "greater than low_freq_factor"};
  return std::pair{theta, r};
}

// "dtype" (v5) or "torch_dtype" (v4): recorded, the weights' own dtype is what the loader reads.
Result<std::string> read_dtype(const nlohmann::json& cfg) {
  for (const char* key : {"dtype", "torch_dtype"}) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) continue;
    if (!it->is_string()) return Error{field_name(key), dump_value(*it), "a dtype name such as bfloat16"};
    return it->get<std::string>();
  }
  return std::string();
}



// Sliding-window attention, the way transformers decides it per layer:
//  - `layer_types` (v4.5x+, v5): the layers marked "sliding_attention" use `sliding_window`;
//  - else Mistral: every layer uses `sliding_window` unless it is null (MistralAttention);
//  - else Qwen2: `use_sliding_window` true turns it on for layers >= `max_window_layers`
//    (Qwen2Config builds layer_types that way).
//  - Mixtral as Mistral; Qwen3 as Qwen2; Qwen3-MoE: `use_sliding_window` turns it on for every
//    layer (Qwen3MoeConfig sets sliding_window to None otherwise).
// Llama and OLMoE have no sliding window. Fills spec.sliding_window* (header comment of ModelSpec).
Status read_sliding_window(const nlohmann::json& cfg, ModelSpec& s) {
  if (s.architecture == "llama" || s.architecture == "olmoe") return {};
  auto window = get_int(cfg, "sliding_window", false, 1);
  if (!window.ok()) return window.error();
  int64_t first = -1;
  std::string field;
  if (auto lt = cfg.find("layer_types"); lt != cfg.end() && lt->is_array()) {
    // One entry per layer, as transformers checks (layer_type_validation): an entry past the
    // last layer would name a layer that does not exist.
    if (static_cast<int64_t>(lt->size()) != s.num_hidden_layers)
      return Error{field_name("layer_types"), std::to_string(lt->size()) + " entries",
                   "one entry per layer (num_hidden_layers = " + std::to_string(s.num_hidden_layers) + ")"};
    for (size_t i = 0; i < lt->size(); ++i)
      if ((*lt)[i] == "sliding_attention") {
        first = static_cast<int64_t>(i);
        field = "layer_types";
        break;
      }
  } else if (s.architecture == "mistral" || s.architecture == "mixtral") {
    if (*window) {
      first = 0;
      field = "sliding_window";
    }
  } else if (s.architecture == "qwen3_moe") {
    auto use = get_bool(cfg, "use_sliding_window");
    if (!use.ok()) return use.error();
    if (use->value_or(false)) {
      first = 0;
      field = "use_sliding_window";
    }
  } else {
    auto use = get_bool(cfg, "use_sliding_window");
    if (!use.ok()) return use.error();
    auto from = get_int(cfg, "max_window_layers", false, 0);
    if (!from.ok()) return from.error();
    if (use->value_or(false) && from->value_or(0) < s.num_hidden_layers) {
      first = from->value_or(0);
      field = "use_sliding_window";
    }
  }
  if (first < 0) return {};
  if (!*window)
    return Error{field_name(field), field == "layer_types" ? "sliding_attention" : "true",
                 "a config with sliding_window set (the window those layers use)"};
  s.sliding_window = **window;
  s.sliding_window_from_layer = first;
  s.sliding_window_field = field;
  return {};
}

// The q/k norms and the experts, as each family's config class reads them (its defaults where
// config.json is silent). Mixtral and OLMoE make every layer sparse and call their expert width
// intermediate_size; Qwen3-MoE has moe_intermediate_size for experts and intermediate_size for
// its dense layers. Settings meshtrain does not implement are refused rather than ignored.
Status read_qk_norm_and_experts(const nlohmann::json& cfg, ModelSpec& s) {
  const std::string& a = s.architecture;
  if (a == "qwen3" || a == "qwen3_moe") s.qk_norm = QkNorm::per_head;
  if (a == "olmoe") {
    s.qk_norm = QkNorm::whole_projection;
    // OlmoeAttention's q_norm is [hidden_size] and k_norm [hidden_size / heads * kv_heads]: they
    // fit the projections only when head_dim is hidden_size / heads.
    if (s.q_dim() != s.hidden_size)
      return Error{"model.head_dim", std::to_string(s.head_dim),
                   "hidden_size / num_attention_heads (" + std::to_string(s.hidden_size / s.num_attention_heads) +
                       "): OLMoE's q/k norms span hidden_size"};
    if (auto it = cfg.find("clip_qkv"); it != cfg.end() && !it->is_null())
      return Error{"model.clip_qkv", dump_value(*it), "null (meshtrain does not clamp q, k and v)"};
  }
  if (a == "mixtral") {
    if (auto it = cfg.find("router_jitter_noise"); it != cfg.end() && !it->is_null() &&
                                                   !(it->is_number() && it->get<double>() == 0.0))
      return Error{"model.router_jitter_noise", dump_value(*it), "0 (meshtrain routes without noise)"};
  }
  if (a != "qwen3_moe" && a != "mixtral" && a != "olmoe") return {};

  MoeSpec& m = s.moe;
  const bool qwen = a == "qwen3_moe";
  // transformers maps each family's two names onto one attribute (attribute_map), and 5.x's
  // save_pretrained writes Qwen3-MoE's as num_local_experts where published configs say
  // num_experts: read the family's own key, else the other.
  const char* experts_key = a == "mixtral" ? "num_local_experts" : "num_experts";
  const char* experts_alias = a == "mixtral" ? "num_experts" : "num_local_experts";
  if (!cfg.contains(experts_key) && cfg.contains(experts_alias)) experts_key = experts_alias;
  MW_TRY(experts, get_int(cfg, experts_key, false, 0));
  MW_TRY(top_k, get_int(cfg, "num_experts_per_tok", false, 1));
  m.num_experts = experts.value_or(qwen ? 128 : a == "mixtral" ? 8 : 64);
  m.experts_per_token = top_k.value_or(qwen ? 8 : a == "mixtral" ? 2 : 8);
  if (qwen) {
    MW_TRY(width, get_int(cfg, "moe_intermediate_size", false, 1));
    m.expert_intermediate_size = width.value_or(768);
  } else {
    m.expert_intermediate_size = s.intermediate_size;
  }
  if (a == "mixtral") {
    m.norm_topk_prob = true;  // MixtralTopKRouter always renormalises
  } else {
    MW_TRY(norm, get_bool(cfg, "norm_topk_prob"));
    m.norm_topk_prob = norm.value_or(false);
  }
  if (auto it = cfg.find("router_aux_loss_coef"); it != cfg.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() < 0)
      return Error{"model.router_aux_loss_coef", dump_value(*it), "a number >= 0"};
    m.router_aux_loss_coef = it->get<double>();
  } else {
    m.router_aux_loss_coef = a == "olmoe" ? 0.01 : 0.001;
  }
  MW_TRY(router_logits, get_bool(cfg, "output_router_logits"));
  m.output_router_logits = router_logits.value_or(false);
  if (qwen) {
    MW_TRY(step, get_int(cfg, "decoder_sparse_step", false, 1));
    m.decoder_sparse_step = step.value_or(1);
    if (auto it = cfg.find("mlp_only_layers"); it != cfg.end() && !it->is_null()) {
      if (!it->is_array()) return Error{"model.mlp_only_layers", dump_value(*it), "a list of layer indices"};
      for (const auto& v : *it) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= s.num_hidden_layers)
          return Error{"model.mlp_only_layers", dump_value(v),
                       "layer indices from 0 to " + std::to_string(s.num_hidden_layers - 1)};
        m.mlp_only_layers.push_back(v.get<int64_t>());
      }
    }
  }
  if (m.num_experts == 0) {  // Qwen3-MoE with no experts: every layer dense
    m = MoeSpec{};
    return {};
  }
  if (m.experts_per_token > m.num_experts)
    return Error{"model.num_experts_per_tok", std::to_string(m.experts_per_token),
                 "at most the number of experts (" + std::to_string(m.num_experts) + ")"};
  return {};
}

}  // namespace

Result<ModelSpec> model_spec_from_json(const nlohmann::json& cfg, std::string name) {
  if (!cfg.is_object())
    return Error{"model", cfg.is_string() ? cfg.get<std::string>() : std::string(cfg.type_name()),
                 "a config.json object"};
  ModelSpec s;
  s.name = std::move(name);
  MW_TRY(arch, detect_architecture(cfg));
  s.architecture = arch;

  if (auto it = cfg.find("hidden_act"); it != cfg.end() && !it->is_null()) {
    const std::string act = it->is_string() ? it->get<std::string>() : it->dump();
    if (act != "silu" && act != "swish")
      return Error{"model.hidden_act", act, "silu (the SwiGLU MLP of Llama/Mistral/Qwen2)"};
  }

  MW_TRY(hidden, get_int(cfg, "hidden_size", true, 1));
  MW_TRY(inter, get_int(cfg, "intermediate_size", true, 1));
  MW_TRY(layers, get_int(cfg, "num_hidden_layers", true, 1));
  MW_TRY(heads, get_int(cfg, "num_attention_heads", true, 1));
  MW_TRY(kv, get_int(cfg, "num_key_value_heads", false, 1));
  MW_TRY(hd, get_int(cfg, "head_dim", false, 1));
  MW_TRY(vocab, get_int(cfg, "vocab_size", true, 1));
  MW_TRY(maxpos, get_int(cfg, "max_position_embeddings", true, 1));
  s.hidden_size = *hidden;
  s.intermediate_size = *inter;
  s.num_hidden_layers = *layers;
  s.num_attention_heads = *heads;
  s.num_key_value_heads = kv ? *kv : *heads;  // HF: absent means multi-head (no GQA)
  s.vocab_size = *vocab;
  s.max_position_embeddings = *maxpos;

  if (hd) {
    s.head_dim = *hd;
  } else if (s.architecture == "qwen3") {
    s.head_dim = 128;  // Qwen3Config's default, not hidden_size / heads
  } else {
    if (s.hidden_size % s.num_attention_heads != 0)
      return Error{"model.hidden_size", std::to_string(s.hidden_size),
                   "must be divisible by num_attention_heads (" +
                       std::to_string(s.num_attention_heads) + ") when head_dim is not given"};
    s.head_dim = s.hidden_size / s.num_attention_heads;
  }
  if (s.num_key_value_heads > s.num_attention_heads ||
      s.num_attention_heads % s.num_key_value_heads != 0)
    return Error{"model.num_key_value_heads", std::to_string(s.num_key_value_heads),
                 "must divide num_attention_heads (" + std::to_string(s.num_attention_heads) +
                     ")"};
  if (s.head_dim % 2 != 0)
    return Error{"model.head_dim", std::to_string(s.head_dim), "an even number (RoPE rotates pairs)"};

  MW_TRY(tie, get_bool(cfg, "tie_word_embeddings"));
  s.tie_word_embeddings = tie.value_or(false);  // PretrainedConfig's default is true, but every
  // Llama/Mistral/Qwen2 config class defaults to false, and that is what from_pretrained uses.
  MW_TRY(abias, get_bool(cfg, "attention_bias"));
  MW_TRY(mbias, get_bool(cfg, "mlp_bias"));
  if (s.architecture == "qwen2") {
    // Qwen2Attention hard-codes bias=True on q/k/v and bias=False on o; config.json says nothing.
    s.attention_bias = true;
    s.o_proj_bias = false;
  } else if (s.architecture == "llama") {
    // LlamaAttention passes config.attention_bias to q, k, v and o alike.
    s.attention_bias = abias.value_or(false);
    s.o_proj_bias = s.attention_bias;
    s.mlp_bias = mbias.value_or(false);
  } else if (s.architecture == "qwen3" || s.architecture == "qwen3_moe" || s.architecture == "olmoe") {
    // Their attention passes config.attention_bias to q, k, v and o; their MLPs have no bias.
    s.attention_bias = abias.value_or(false);
    s.o_proj_bias = s.attention_bias;
  }  // Mistral and Mixtral have no biases at all.
  if (Status st = read_qk_norm_and_experts(cfg, s); !st.ok()) return st.error();

  MW_TRY(theta, get_double(cfg, "rope_theta"));
  MW_TRY(eps, get_double(cfg, "rms_norm_eps"));
  s.rope_theta = theta.value_or(10000.0);
  MW_TRY(rope, read_rope(cfg, s.rope_theta));
  s.rope_theta = rope.first;
  s.rope_scaling = rope.second;
  MW_TRY(dtype, read_dtype(cfg));
  s.dtype = dtype;
  s.rms_norm_eps = eps.value_or(s.architecture.starts_with("qwen") ? 1e-6 : 1e-5);
  if (Status st = read_sliding_window(cfg, s); !st.ok()) return st.error();
  // Every size estimate multiplies these numbers in int64: a model past 10^15 parameters (1,000x
  // the largest trained) is a typo or a hostile file, refused before anything overflows. The
  // count is taken in 128 bits once each factor is below 2^40 (products of two below 2^80).
  using Wide = __int128;
  constexpr Wide kFactor = Wide{1} << 40;
  const Wide h = s.hidden_size, qw = Wide{s.num_attention_heads} * s.head_dim,
             kvw = Wide{s.num_key_value_heads} * s.head_dim;
  bool too_big = h > kFactor || qw > kFactor || kvw > kFactor || s.intermediate_size > kFactor ||
                 s.vocab_size > kFactor || s.num_hidden_layers > kFactor ||
                 s.moe.num_experts > kFactor || s.moe.expert_intermediate_size > kFactor;
  if (!too_big) {
    const Wide experts = Wide{s.moe.num_experts} * (3 * h * s.moe.expert_intermediate_size + h);
    const Wide layer = 2 * h * qw + 2 * h * kvw + 3 * h * s.intermediate_size + 2 * qw + 3 * kvw +
                       2 * s.intermediate_size + 4 * h + experts;
    too_big = 2 * Wide{s.vocab_size} * h + Wide{s.num_hidden_layers} * layer + h > Wide{1000000000000000};
  }
  if (too_big)
    return Error{"model", "hidden_size " + std::to_string(s.hidden_size) + ", intermediate_size " +
                              std::to_string(s.intermediate_size) + ", " + std::to_string(s.num_hidden_layers) +
                              " layers, vocab " + std::to_string(s.vocab_size),
                 "a model of at most 10^15 parameters"};
  return s;
}

nlohmann::json model_spec_to_json(const ModelSpec& s) {
  nlohmann::json j;
  const std::string type = s.architecture.empty() ? "llama" : s.architecture;
  for (const auto& [t, cls] : kArchitectures)
    if (type == t) j["architectures"] = {cls};
  j["model_type"] = type;
  j["hidden_act"] = "silu";
  j["hidden_size"] = s.hidden_size;
  j["intermediate_size"] = s.intermediate_size;
  j["num_hidden_layers"] = s.num_hidden_layers;
  j["num_attention_heads"] = s.num_attention_heads;
  j["num_key_value_heads"] = s.num_key_value_heads;
  j["head_dim"] = s.head_dim;
  j["vocab_size"] = s.vocab_size;
  j["max_position_embeddings"] = s.max_position_embeddings;
  j["tie_word_embeddings"] = s.tie_word_embeddings;
  j["rope_theta"] = s.rope_theta;
  if (s.rope_scaling.type != "default")
    j["rope_scaling"] = {{"rope_type", s.rope_scaling.type},
                         {"factor", s.rope_scaling.factor},
                         {"low_freq_factor", s.rope_scaling.low_freq_factor},
                         {"high_freq_factor", s.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", s.rope_scaling.original_max_position_embeddings}};
  if (!s.dtype.empty()) j["torch_dtype"] = s.dtype;
  j["rms_norm_eps"] = s.rms_norm_eps;
  // Sliding window: said explicitly either way (MistralConfig's default is 4096, not null).
  const auto window = s.sliding_window ? nlohmann::json(s.sliding_window) : nlohmann::json(nullptr);
  if (type == "mistral" || type == "mixtral") {
    j["sliding_window"] = window;
  } else if (type == "qwen2" || type == "qwen3") {
    j["use_sliding_window"] = s.sliding_window > 0;
    j["sliding_window"] = window;
    j["max_window_layers"] = s.sliding_window ? s.sliding_window_from_layer : s.num_hidden_layers;
  } else if (type == "qwen3_moe") {
    j["use_sliding_window"] = s.sliding_window > 0;
    j["sliding_window"] = window;
  }
  if (type == "llama" || type == "qwen3" || type == "qwen3_moe" || type == "olmoe")
    j["attention_bias"] = s.attention_bias;
  if (type == "llama") j["mlp_bias"] = s.mlp_bias;
  if (s.is_moe()) {
    const MoeSpec& m = s.moe;
    j[type == "mixtral" ? "num_local_experts" : "num_experts"] = m.num_experts;
    j["num_experts_per_tok"] = m.experts_per_token;
    if (type == "qwen3_moe") {
      j["moe_intermediate_size"] = m.expert_intermediate_size;
      j["decoder_sparse_step"] = m.decoder_sparse_step;
      j["mlp_only_layers"] = m.mlp_only_layers;
    }
    if (type != "mixtral") j["norm_topk_prob"] = m.norm_topk_prob;
    j["router_aux_loss_coef"] = m.router_aux_loss_coef;
    j["output_router_logits"] = m.output_router_logits;
  }
  return j;
}

// ---------------------------------------------------------------------------------------------
// Files and presets
// ---------------------------------------------------------------------------------------------
Result<ModelSpec> load_model_spec_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in)
    return Error{"model", path.string(), "a readable config.json file or a preset name"};
  nlohmann::json cfg = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded())
    return Error{"model", path.string(), "a file holding valid JSON (a Hugging Face config.json)"};
  std::string name = path.stem().string();
  if (name == "config" && path.has_parent_path() && !path.parent_path().filename().empty())
    name = path.parent_path().filename().string();  // .../Llama-3.1-8B/config.json
  return model_spec_from_json(cfg, name);
}

fs::path preset_dir() { return resource_dir() / "models"; }

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(preset_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<ModelSpec> load_model_spec(std::string_view name_or_path) {
  const std::string text(name_or_path);
  if (text.empty()) return Error{"model", "\"\"", "a preset name or a path to a config.json"};
  std::error_code ec;
  const bool looks_like_path = text.find('/') != std::string::npos ||
                               fs::is_regular_file(fs::path(text) / "config.json", ec) ||
                               (text.size() > 5 && text.ends_with(".json"));
  if (looks_like_path) {
    fs::path p(text);
    if (fs::is_directory(p, ec)) {
      p /= "config.json";
      if (!fs::exists(p, ec))
        return Error{"model", text, "a Hugging Face model directory holding config.json"};
    }
    if (!fs::exists(p, ec))
      return Error{"model", text, "a path to an existing config.json or model directory, or a preset name"};
    return load_model_spec_file(p);
  }
  const fs::path preset = preset_dir() / (text + ".json");
  if (fs::exists(preset, ec)) {
    auto spec = load_model_spec_file(preset);
    if (spec.ok()) spec->name = text;
    return spec;
  }
  std::string allowed = "a preset (";
  const auto names = preset_names();
  for (size_t i = 0; i < names.size(); ++i) allowed += (i ? ", " : "") + names[i];
  if (names.empty()) allowed += "none found in " + preset_dir().string();
  allowed += ") or a path to a config.json";
  return Error{"model", text, allowed};
}

std::optional<fs::path> hf_weights_dir(const nlohmann::json& model) {
  if (!model.is_string()) return std::nullopt;
  std::error_code ec;
  fs::path p(model.get<std::string>());
  if (!fs::is_directory(p, ec)) {
    if (p.filename() != "config.json" || !fs::is_regular_file(p, ec)) return std::nullopt;
    p = p.parent_path();
    if (p.empty()) p = ".";
  }
  if (fs::is_regular_file(p / "model.safetensors", ec) ||
      fs::is_regular_file(p / "model.safetensors.index.json", ec))
    return p;
  return std::nullopt;
}

Result<ModelSpec> model_spec_from_run_model(const nlohmann::json& model) {
  if (model.is_string()) return load_model_spec(model.get<std::string>());
  if (model.is_object()) {
    std::string name = "inline";
    if (auto it = model.find("name"); it != model.end() && it->is_string()) name = *it;
    return model_spec_from_json(model, name);
  }
  return Error{"model", model.dump(), "a preset name, a path, or an inline config.json object"};
}

}  // namespace meshwork
