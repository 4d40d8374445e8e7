// Model specs: every preset's parameter count equals its published total, and real config.json
// files load as they are.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/model_spec.h"
#include "core/rope.h"

#include <cmath>
#include <filesystem>

using namespace meshwork;
using nlohmann::json;

namespace {

ModelSpec preset(const std::string& name) {
  auto spec = load_model_spec(name);
  EXPECT_TRUE(spec.ok()) << (spec.ok() ? "" : spec.error().message());
  return spec.ok() ? *spec : ModelSpec{};
}

json llama8b_config() {
  // meta-llama/Llama-3.1-8B config.json as published, with its extra keys.
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})");
}

}  // namespace

// Published totals: the safetensors index / model card parameter count of each checkpoint.
TEST(ModelSpec, PresetParameterCountsMatchPublishedTotals) {
  const std::vector<std::pair<std::string, int64_t>> published = {
      {"llama-3.2-1b", 1'235'814'400},     {"llama-3.2-3b", 3'212'749'824},
      {"llama-3.1-8b", 8'030'261'248},     {"llama-3.1-70b", 70'553'706'496},
      {"llama-3.1-405b", 405'853'388'800}, {"qwen2.5-7b", 7'615'616'512},
      {"qwen2.5-72b", 72'706'203'648},     {"mistral-7b-v0.3", 7'248'023'552},
  };
  for (const auto& [name, total] : published) {
    EXPECT_EQ(preset(name).parameter_count(), total) << name;
  }
}

TEST(ModelSpec, TrainerPresetsHaveTheAgreedShapes) {
  ModelSpec tiny = preset("tiny");
  EXPECT_EQ(tiny.architecture, "llama");
  EXPECT_EQ(tiny.hidden_size, 64);
  EXPECT_EQ(tiny.intermediate_size, 128);
  EXPECT_EQ(tiny.num_hidden_layers, 2);
  EXPECT_EQ(tiny.num_attention_heads, 8);
  EXPECT_EQ(tiny.num_key_value_heads, 4);
  EXPECT_EQ(tiny.head_dim, 8);
  EXPECT_EQ(tiny.vocab_size, 256);
  EXPECT_EQ(tiny.max_position_embeddings, 512);
  EXPECT_FALSE(tiny.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(tiny.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(tiny.rms_norm_eps, 1e-5);
  // Hand count: embed 256*64 + head 256*64 + final norm 64 + 2 layers of
  // (q 64*64 + k,v 2*64*32 + o 64*64 + mlp 3*64*128 + norms 2*64 = 36,992).
  EXPECT_EQ(tiny.layer_parameter_count(), 36'992);
  EXPECT_EQ(tiny.parameter_count(), 2 * 16'384 + 64 + 2 * 36'992);

  ModelSpec small = preset("small");
  EXPECT_EQ(small.hidden_size, 256);
  EXPECT_EQ(small.intermediate_size, 768);
  EXPECT_EQ(small.num_hidden_layers, 4);
  EXPECT_EQ(small.num_attention_heads, 8);
  EXPECT_EQ(small.num_key_value_heads, 4);
  EXPECT_EQ(small.head_dim, 32);
  EXPECT_EQ(small.vocab_size, 256);
  EXPECT_EQ(small.max_position_embeddings, 1024);
  EXPECT_TRUE(small.tie_word_embeddings);
  EXPECT_EQ(small.lm_head_parameter_count(), 0);
  // layer: q 256*256 + k,v 2*256*128 + o 256*256 + mlp 3*256*768 + norms 512 = 786,944
  EXPECT_EQ(small.parameter_count(), 256 * 256 + 4 * 786'944 + 256);
}

TEST(ModelSpec, PresetNamesListEveryBundledConfig) {
  const auto names = preset_names();
  for (const char* n : {"llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b",
                        "llama-3.1-405b", "qwen2.5-7b", "qwen2.5-72b", "mistral-7b-v0.3", "tiny",
                        "small"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

TEST(ModelSpec, RealHubConfigLoadsAsIs) {
  auto spec = model_spec_from_json(llama8b_config(), "Llama-3.1-8B");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->head_dim, 128);  // absent -> hidden / heads
  EXPECT_EQ(spec->parameter_count(), 8'030'261'248);
  EXPECT_EQ(spec->name, "Llama-3.1-8B");
}

TEST(ModelSpec, QwenHasQkvBiasesWithoutSayingSo) {
  ModelSpec q = preset("qwen2.5-7b");
  EXPECT_TRUE(q.attention_bias);
  EXPECT_FALSE(q.o_proj_bias);
  ModelSpec no_bias = q;
  no_bias.attention_bias = false;
  // 28 layers x (q 3584 + k 512 + v 512) biases.
  EXPECT_EQ(q.parameter_count() - no_bias.parameter_count(), 28 * (3584 + 512 + 512));
}

TEST(ModelSpec, LlamaAttentionBiasCoversOutputProjection) {
  json cfg = llama8b_config();
  cfg["attention_bias"] = true;
  auto spec = model_spec_from_json(cfg, "x");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->parameter_count() - 8'030'261'248, 32 * (4096 + 1024 + 1024 + 4096));
}

TEST(ModelSpec, DefaultsForAbsentOptionalFields) {
  json cfg = llama8b_config();
  cfg.erase("num_key_value_heads");
  auto spec = model_spec_from_json(cfg, "x");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->num_key_value_heads, 32);  // absent -> multi-head attention
}

TEST(ModelSpec, ArchitectureFromArchitecturesWhenModelTypeAbsent) {
  json cfg = llama8b_config();
  cfg.erase("model_type");
  cfg["architectures"] = {"MistralForCausalLM"};
  auto spec = model_spec_from_json(cfg, "x");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->architecture, "mistral");
}

TEST(ModelSpec, ErrorsNameTheField) {
  json missing = llama8b_config();
  missing.erase("hidden_size");
  auto e1 = model_spec_from_json(missing, "x");
  ASSERT_FALSE(e1.ok());
  EXPECT_EQ(e1.error().field, "model.hidden_size");
  EXPECT_EQ(e1.error().value, "missing");

  json bad_type = llama8b_config();
  bad_type["num_hidden_layers"] = "thirty-two";
  auto e2 = model_spec_from_json(bad_type, "x");
  ASSERT_FALSE(e2.ok());
  EXPECT_EQ(e2.error().field, "model.num_hidden_layers");
  EXPECT_EQ(e2.error().value, "thirty-two");

  json arch = llama8b_config();
  arch["model_type"] = "gpt2";
  auto e3 = model_spec_from_json(arch, "x");
  ASSERT_FALSE(e3.ok());
  EXPECT_EQ(e3.error().field, "model.model_type");
  EXPECT_NE(e3.error().allowed.find("qwen2"), std::string::npos);

  json kv = llama8b_config();
  kv["num_key_value_heads"] = 5;
  auto e4 = model_spec_from_json(kv, "x");
  ASSERT_FALSE(e4.ok());
  EXPECT_EQ(e4.error().field, "model.num_key_value_heads");

  json indivisible = llama8b_config();
  indivisible["hidden_size"] = 4095;
  auto e5 = model_spec_from_json(indivisible, "x");
  ASSERT_FALSE(e5.ok());
  EXPECT_EQ(e5.error().field, "model.hidden_size");

  json neg = llama8b_config();
  neg["vocab_size"] = 0;
  EXPECT_EQ(model_spec_from_json(neg, "x").error().field, "model.vocab_size");

  json act = llama8b_config();
  act["hidden_act"] = "gelu";
  EXPECT_EQ(model_spec_from_json(act, "x").error().field, "model.hidden_act");

  EXPECT_EQ(model_spec_from_json(json::array(), "x").error().field, "model");
}

TEST(ModelSpec, RoundTripsThroughJson) {
  for (const std::string name : {"tiny", "small", "qwen2.5-7b", "mistral-7b-v0.3"}) {
    ModelSpec a = preset(name);
    auto b = model_spec_from_json(model_spec_to_json(a), name);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->parameter_count(), a.parameter_count()) << name;
    EXPECT_EQ(b->architecture, a.architecture);
    EXPECT_EQ(b->head_dim, a.head_dim);
  }
}

TEST(ModelSpec, LoadsFromPathAndRunModel) {
  const auto dir = std::filesystem::temp_directory_path() / "meshwork_model_spec_test" / "My-8B";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << llama8b_config().dump();
  auto by_dir = load_model_spec(dir.string());
  ASSERT_TRUE(by_dir.ok()) << by_dir.error().message();
  EXPECT_EQ(by_dir->name, "My-8B");
  EXPECT_EQ(by_dir->parameter_count(), 8'030'261'248);

  std::ofstream(dir / "broken.json") << "{ not json";
  EXPECT_FALSE(load_model_spec((dir / "broken.json").string()).ok());
  EXPECT_FALSE(load_model_spec("/no/such/config.json").ok());

  auto unknown = load_model_spec("llama-9000");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().field, "model");
  EXPECT_NE(unknown.error().allowed.find("tiny"), std::string::npos);

  EXPECT_EQ(model_spec_from_run_model(json("tiny"))->parameter_count(), 106'816);
  EXPECT_EQ(model_spec_from_run_model(llama8b_config())->parameter_count(), 8'030'261'248);
  EXPECT_FALSE(model_spec_from_run_model(json(3)).ok());
  std::filesystem::remove_all(dir.parent_path());
}

TEST(ModelSpec, ResourceDirFromEnvironment) {
  const auto dir = std::filesystem::temp_directory_path() / "meshwork_res_test";
  std::filesystem::create_directories(dir / "models");
  std::ofstream(dir / "models" / "only.json") << model_spec_to_json(preset("tiny")).dump();
  setenv("MESHWORK_RESOURCE_DIR", dir.c_str(), 1);
  EXPECT_EQ(preset_names(), std::vector<std::string>{"only"});
  EXPECT_TRUE(load_model_spec("only").ok());
  EXPECT_FALSE(load_model_spec("tiny").ok());
  unsetenv("MESHWORK_RESOURCE_DIR");
  EXPECT_TRUE(load_model_spec("tiny").ok());
  std::filesystem::remove_all(dir);
}

TEST(ModelSpec, RopeScalingLlama3FromV4AndV5Keys) {
  // v4: top-level rope_theta and rope_scaling, torch_dtype.
  auto v4 = model_spec_from_json(llama8b_config(), "v4");
  ASSERT_TRUE(v4.ok()) << v4.error().message();
  EXPECT_EQ(v4->rope_theta, 500000.0);
  EXPECT_EQ(v4->rope_scaling.type, "llama3");
  EXPECT_EQ(v4->rope_scaling.factor, 8.0);
  EXPECT_EQ(v4->rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(v4->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(v4->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(v4->dtype, "bfloat16");
  // v5 (transformers 5 save_pretrained): rope_parameters holds rope_theta; dtype.
  json c = llama8b_config();
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c.erase("torch_dtype");
  c["dtype"] = "float32";
  c["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  auto v5 = model_spec_from_json(c, "v5");
  ASSERT_TRUE(v5.ok()) << v5.error().message();
  EXPECT_EQ(v5->rope_theta, 500000.0);
  EXPECT_EQ(v5->rope_scaling, v4->rope_scaling);
  EXPECT_EQ(v5->dtype, "float32");
  // v5 default type, and the older "type" key of v4.
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  auto plain = model_spec_from_json(c, "plain");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->rope_theta, 1e6);
  EXPECT_EQ(plain->rope_scaling.type, "default");
  // The scaling survives model_spec_to_json.
  auto back = model_spec_from_json(model_spec_to_json(*v4), "back");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rope_scaling, v4->rope_scaling);
  EXPECT_EQ(back->dtype, "bfloat16");
}

TEST(ModelSpec, UnimplementedRopeScalingIsRefusedByName) {
  for (const std::string type : {"linear", "dynamic", "yarn", "longrope"}) {
    json c = llama8b_config();
    c["rope_scaling"] = {{"rope_type", type}, {"factor", 2.0}};
    auto s = model_spec_from_json(c, "x");
    ASSERT_FALSE(s.ok()) << type;
    EXPECT_EQ(s.error().message(),
              "model.rope_scaling.rope_type: " + type + ": default or llama3 (the RoPE scalings meshtrain implements)");
  }
  json c = llama8b_config();
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"type", "yarn"}, {"rope_theta", 1e4}};
  auto s = model_spec_from_json(c, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "model.rope_parameters.type: yarn: default or llama3 (the RoPE scalings meshtrain implements)");
  c["rope_parameters"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
  s = model_spec_from_json(c, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().field, "model.rope_parameters.original_max_position_embeddings");
}

TEST(ModelSpec, Llama3InverseFrequenciesFollowTheThreeBands) {
  auto spec = model_spec_from_json(llama8b_config(), "x");
  ASSERT_TRUE(spec.ok());
  const auto inv = rope_inverse_frequencies(*spec);
  ModelSpec plain = *spec;
  plain.rope_scaling = RopeScaling{};
  const auto base = rope_inverse_frequencies(plain);
  ASSERT_EQ(inv.size(), 64u);
  // Values of transformers' _compute_llama3_parameters for Llama-3.1-8B (D 128, theta 5e5).
  EXPECT_DOUBLE_EQ(inv[0], 1.0);                  // highest frequency: kept
  EXPECT_DOUBLE_EQ(inv[63], base[63] / 8.0);      // lowest: divided by factor
  const double C = 8192, wavelen = 2 * M_PI / base[32];
  ASSERT_GT(wavelen, C / 4);  // pair 32 is in the medium band
  ASSERT_LT(wavelen, C / 1);
  const double smooth = (C / wavelen - 1) / (4 - 1);
  EXPECT_DOUBLE_EQ(inv[32], (1 - smooth) * base[32] / 8 + smooth * base[32]);
  // transformers 5.24's ROPE_INIT_FUNCTIONS["llama3"] (fp32) for the same config.
  EXPECT_NEAR(inv[32], 0.0005248460220173001, 1e-6 * inv[32]);
  EXPECT_NEAR(inv[63], 3.068925877869333e-07, 1e-6 * inv[63]);
}

TEST(ModelSpec, HfDirectoryWithWeights) {
  const auto dir = std::filesystem::temp_directory_path() / "meshwork_model_spec_hf_dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << llama8b_config().dump();
  EXPECT_FALSE(hf_weights_dir(json(dir.string())).has_value());  // config only: no weights
  std::ofstream(dir / "model.safetensors") << "x";
  EXPECT_EQ(hf_weights_dir(json(dir.string())), dir);
  EXPECT_EQ(hf_weights_dir(json((dir / "config.json").string())), dir);
  EXPECT_FALSE(hf_weights_dir(json("tiny")).has_value());
  EXPECT_FALSE(hf_weights_dir(llama8b_config()).has_value());
  auto missing = load_model_spec((dir / "nothing").string() + "/");
  ASSERT_FALSE(missing.ok());
  std::filesystem::remove_all(dir);
}

namespace {

// Sliding-window attention as transformers' configs say it (v5 writes layer_types; Mistral's
// default window is 4096): the spec records the window and the first layer using it, and the
// HF config written back reads to the same values.
TEST(ModelSpec, SlidingWindowFromMistralAndQwen2Configs) {
  json mistral = llama8b_config();
  mistral.erase("rope_scaling");
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 4096;
  auto m = model_spec_from_json(mistral, "m");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->sliding_window, 4096);
  EXPECT_EQ(m->sliding_window_from_layer, 0);
  EXPECT_EQ(m->sliding_window_field, "sliding_window");
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(model_spec_from_json(mistral, "m")->sliding_window, 0);

  json qwen = mistral;
  qwen["model_type"] = "qwen2";
  qwen["num_hidden_layers"] = 4;
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 512;
  qwen["max_window_layers"] = 3;  // v4 style: layers 3.. slide
  auto q = model_spec_from_json(qwen, "q");
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ(q->sliding_window, 512);
  EXPECT_EQ(q->sliding_window_from_layer, 3);
  EXPECT_EQ(q->sliding_window_field, "use_sliding_window");
  // v5: layer_types decides (here layer 1 only), whatever the flag says.
  qwen["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  q = model_spec_from_json(qwen, "q");
  EXPECT_EQ(q->sliding_window_from_layer, 1);
  EXPECT_EQ(q->sliding_window_field, "layer_types");
  qwen["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
  EXPECT_EQ(model_spec_from_json(qwen, "q")->sliding_window, 0);
  // One entry per layer: a list longer than the model names layers that do not exist (a sliding
  // layer past the last one was written back as a window that never applies) and is refused.
  qwen["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention", "sliding_attention"};
  auto extra = model_spec_from_json(qwen, "q");
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.error().message(), "model.layer_types: 5 entries: one entry per layer (num_hidden_layers = 4)");
  // Sliding layers with no window to slide by: refused naming the key.
  qwen.erase("layer_types");
  qwen["sliding_window"] = nullptr;
  auto bad = model_spec_from_json(qwen, "q");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "model.use_sliding_window: true: a config with sliding_window set (the window those layers use)");

  // Written back and read again: the same window (Mistral's null stays null, not 4096).
  for (const ModelSpec& s : {*m, *model_spec_from_json(mistral, "m")}) {
    auto again = model_spec_from_json(model_spec_to_json(s), "m");
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->sliding_window, s.sliding_window);
  }
  qwen["sliding_window"] = 512;
  auto q3 = *model_spec_from_json(qwen, "q");
  auto q3again = model_spec_from_json(model_spec_to_json(q3), "q");
  ASSERT_TRUE(q3again.ok());
  EXPECT_EQ(q3again->sliding_window, 512);
  EXPECT_EQ(q3again->sliding_window_from_layer, 3);
}

}  // namespace

// Sizes whose products overflow int64 (every estimate multiplies them) are refused by the one
// rule that bounds them all: at most 10^15 parameters. Llama-3.1-405B itself passes.
TEST(ModelSpec, AModelPastAQuadrillionParametersIsRefused) {
  json big = llama8b_config();
  big["hidden_size"] = 4000000000LL;
  big["vocab_size"] = 4000000000LL;
  big["head_dim"] = 128;
  auto r = model_spec_from_json(big, "big");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "model: hidden_size 4000000000, intermediate_size 14336, 32 layers, vocab 4000000000: "
            "a model of at most 10^15 parameters");
  json huge_heads = llama8b_config();
  huge_heads["num_attention_heads"] = int64_t{1} << 40;
  huge_heads["num_key_value_heads"] = 8;
  huge_heads["head_dim"] = int64_t{1} << 40;  // heads x head_dim past 2^63 in int64
  EXPECT_FALSE(model_spec_from_json(huge_heads, "h").ok());
  auto ok = model_spec_from_json(llama8b_config(), "8b");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_GT(ok->parameter_count(), 7'000'000'000);
}
