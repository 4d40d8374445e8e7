// Mixture-of-experts and Qwen3 model specs: the presets' totals equal what transformers counts for
// the published configs, the active counts follow from them, the sparse layers are the ones
// transformers builds, and what meshtrain does not implement is refused by field.
#include <gtest/gtest.h>

#include "core/model_spec.h"

using namespace meshwork;
using nlohmann::json;

namespace {

ModelSpec preset(const std::string& name) {
  auto spec = load_model_spec(name);
  EXPECT_TRUE(spec.ok()) << (spec.ok() ? "" : spec.error().message());
  return spec.ok() ? *spec : ModelSpec{};
}

Error refusal(json cfg) {
  auto spec = model_spec_from_json(cfg, "x");
  EXPECT_FALSE(spec.ok()) << cfg.dump();
  return spec.ok() ? Error{} : spec.error();
}

// A small Qwen3-MoE config as save_pretrained writes it: experts on layer 1 only (step 2, layer 3
// dense by mlp_only_layers), biases on the attention projections.
json small_qwen3_moe() {
  return json{{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"},
              {"hidden_size", 64}, {"intermediate_size", 96}, {"moe_intermediate_size", 32},
              {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"head_dim", 16}, {"vocab_size", 256}, {"max_position_embeddings", 128},
              {"num_experts", 8}, {"num_experts_per_tok", 2}, {"decoder_sparse_step", 2},
              {"mlp_only_layers", {3}}, {"attention_bias", true}, {"norm_topk_prob", true}};
}

}  // namespace

// Totals: sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters()) with
// transformers 5.24 on the meta device, for the bundled preset configs. Active: the model cards'
// "activated" figures (3.3B, 22B, 12.9B, 1.3B) to the parameter.
TEST(MoeSpec, PresetCountsEqualTransformers) {
  struct Row {
    const char* name;
    int64_t total, active;
  };
  for (const Row& r : {Row{"qwen3-8b", 8'190'735'360, 8'190'735'360},
                       Row{"qwen3-30b-a3b", 30'532'122'624, 3'353'032'704},
                       Row{"qwen3-235b-a22b", 235'093'634'560, 22'190'763'520},
                       Row{"mixtral-8x7b", 46'702'792'704, 12'879'925'248},
                       Row{"olmoe-1b-7b", 6'919'161'856, 1'282'017'280}}) {
    const ModelSpec s = preset(r.name);
    EXPECT_EQ(s.parameter_count(), r.total) << r.name;
    EXPECT_EQ(s.active_parameter_count(), r.active) << r.name;
  }
}

TEST(MoeSpec, FamiliesReadTheirOwnKeys) {
  const ModelSpec q3 = preset("qwen3-8b");
  EXPECT_FALSE(q3.is_moe());
  EXPECT_EQ(q3.qk_norm, QkNorm::per_head);
  EXPECT_EQ(q3.rms_norm_eps, 1e-6);

  const ModelSpec q = preset("qwen3-30b-a3b");
  EXPECT_EQ(q.moe.num_experts, 128);
  EXPECT_EQ(q.moe.experts_per_token, 8);
  EXPECT_EQ(q.moe.expert_intermediate_size, 768);
  EXPECT_TRUE(q.moe.norm_topk_prob);
  EXPECT_EQ(q.sparse_layer_count(), 48);

  const ModelSpec mx = preset("mixtral-8x7b");
  EXPECT_EQ(mx.moe.num_experts, 8);  // num_local_experts
  EXPECT_EQ(mx.moe.experts_per_token, 2);
  EXPECT_EQ(mx.moe.expert_intermediate_size, 14336);  // Mixtral's intermediate_size is the expert's
  EXPECT_TRUE(mx.moe.norm_topk_prob);                 // always renormalised
  EXPECT_EQ(mx.moe.router_aux_loss_coef, 0.02);
  EXPECT_EQ(mx.qk_norm, QkNorm::none);

  const ModelSpec o = preset("olmoe-1b-7b");
  EXPECT_EQ(o.qk_norm, QkNorm::whole_projection);
  EXPECT_FALSE(o.moe.norm_topk_prob);
  EXPECT_EQ(o.moe.num_experts, 64);
}

// transformers builds Qwen3MoeMLP, SparseMoeBlock, MLP, MLP for this config and counts 188,352.
TEST(MoeSpec, SparseLayersFollowStepAndMlpOnlyLayers) {
  auto s = model_spec_from_json(small_qwen3_moe(), "x");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_FALSE(s->layer_is_sparse(0));
  EXPECT_TRUE(s->layer_is_sparse(1));
  EXPECT_FALSE(s->layer_is_sparse(2));
  EXPECT_FALSE(s->layer_is_sparse(3));
  EXPECT_EQ(s->sparse_layer_count(), 1);
  EXPECT_EQ(s->parameter_count(), 188'352);
  EXPECT_EQ(s->active_parameter_count(), 188'352 - 6 * 3 * 64 * 32);
}

// A tied OLMoE: transformers counts 91,136 (the head shares the embedding).
TEST(MoeSpec, OlmoeNormsSpanTheProjections) {
  json cfg = {{"model_type", "olmoe"}, {"hidden_size", 64}, {"intermediate_size", 32},
              {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"vocab_size", 256}, {"max_position_embeddings", 128}, {"num_experts", 4},
              {"num_experts_per_tok", 2}, {"tie_word_embeddings", true}};
  auto s = model_spec_from_json(cfg, "x");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->parameter_count(), 91'136);
  cfg["head_dim"] = 32;
  EXPECT_EQ(refusal(cfg).field, "model.head_dim");
}

TEST(MoeSpec, UnimplementedSettingsAreRefusedByField) {
  json top = small_qwen3_moe();
  top["num_experts_per_tok"] = 9;
  EXPECT_EQ(refusal(top).field, "model.num_experts_per_tok");
  json layers = small_qwen3_moe();
  layers["mlp_only_layers"] = {7};
  const Error e = refusal(layers);
  EXPECT_EQ(e.field, "model.mlp_only_layers");
  EXPECT_EQ(e.value, "7");
  json clip = {{"model_type", "olmoe"}, {"hidden_size", 64}, {"intermediate_size", 32},
               {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"vocab_size", 256},
               {"max_position_embeddings", 128}, {"clip_qkv", 8.0}};
  EXPECT_EQ(refusal(clip).field, "model.clip_qkv");
  json jitter = {{"model_type", "mixtral"}, {"hidden_size", 64}, {"intermediate_size", 32},
                 {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"vocab_size", 256},
                 {"max_position_embeddings", 128}, {"router_jitter_noise", 0.1}};
  EXPECT_EQ(refusal(jitter).field, "model.router_jitter_noise");
  json unknown = {{"model_type", "deepseek_v3"}};
  const Error u = refusal(unknown);
  EXPECT_EQ(u.field, "model.model_type");
  EXPECT_NE(u.allowed.find("qwen3_moe"), std::string::npos);
}

TEST(MoeSpec, SlidingWindowPerFamily) {
  json q = small_qwen3_moe();
  q["use_sliding_window"] = true;
  q["sliding_window"] = 64;
  auto s = model_spec_from_json(q, "x");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->sliding_window, 64);
  EXPECT_EQ(s->sliding_window_from_layer, 0);  // Qwen3-MoE: every layer
  json o = {{"model_type", "olmoe"}, {"hidden_size", 64}, {"intermediate_size", 32},
            {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"vocab_size", 256},
            {"max_position_embeddings", 128}, {"sliding_window", 16}};
  auto so = model_spec_from_json(o, "x");
  ASSERT_TRUE(so.ok());
  EXPECT_EQ(so->sliding_window, 0);  // OLMoE has none
}

TEST(MoeSpec, RoundTripsThroughJson) {
  for (const std::string name : {"qwen3-8b", "qwen3-30b-a3b", "mixtral-8x7b", "olmoe-1b-7b"}) {
    const ModelSpec a = preset(name);
    auto b = model_spec_from_json(model_spec_to_json(a), name);
    ASSERT_TRUE(b.ok()) << name << ": " << b.error().message();
    EXPECT_EQ(b->architecture, a.architecture);
    EXPECT_EQ(b->moe, a.moe) << name;
    EXPECT_EQ(b->qk_norm, a.qk_norm) << name;
    EXPECT_EQ(b->parameter_count(), a.parameter_count()) << name;
  }
  auto small = model_spec_from_json(small_qwen3_moe(), "x");
  auto back = model_spec_from_json(model_spec_to_json(*small), "x");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->moe, small->moe);
  EXPECT_EQ(back->parameter_count(), 188'352);
}
