#include "core/run_config.h"

#include "core/mesh_json.h"

#include <fstream>
#include <sstream>

namespace meshwork {

namespace {

// The words of each enum, one table each: to_string() and the parser read the same table.
template <class T>
struct Word {
  T value;
  std::string_view text;
};
constexpr Word<Precision> kPrecisions[] = {{Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}};
constexpr Word<ActivationCheckpointing> kCheckpointing[] = {{ActivationCheckpointing::none, "none"},
                                                            {ActivationCheckpointing::full, "full"}};
constexpr Word<DeviceKind> kDevices[] = {{DeviceKind::cpu, "cpu"}, {DeviceKind::cuda, "cuda"}};
constexpr Word<FsdpGradSync> kGradSyncs[] = {{FsdpGradSync::micro_batch, "micro-batch"}, {FsdpGradSync::step, "step"}};
constexpr Word<WeightInit> kWeightInits[] = {
    {WeightInit::auto_, "auto"}, {WeightInit::hf, "hf"}, {WeightInit::random, "random"}};
constexpr Word<PipelineSchedule> kSchedules[] = {{PipelineSchedule::gpipe, "gpipe"},
                                                 {PipelineSchedule::one_f_one_b, "1f1b"},
                                                 {PipelineSchedule::interleaved_1f1b, "interleaved-1f1b"}};

template <class T, size_t N>
std::string_view word_of(const Word<T> (&words)[N], T value) {
  for (const auto& w : words)
    if (w.value == value) return w.text;
  return "?";
}

// "must be a or b" (or "a, b or c"), naming `field` and the text given.
template <class T, size_t N>
Result<T> parse_word(const Word<T> (&words)[N], std::string_view text, std::string_view field) {
  std::string allowed;
  for (size_t i = 0; i < N; ++i) {
    if (words[i].text == text) return words[i].value;
    allowed += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(words[i].text);
  }
  return Error{std::string(field), std::string(text), "must be " + allowed};
}

}  // namespace

std::string_view to_string(Precision p) { return word_of(kPrecisions, p); }
std::string_view to_string(ActivationCheckpointing a) { return word_of(kCheckpointing, a); }
std::string_view to_string(DeviceKind d) { return word_of(kDevices, d); }
std::string_view to_string(FsdpGradSync s) { return word_of(kGradSyncs, s); }
std::string_view to_string(WeightInit w) { return word_of(kWeightInits, w); }
std::string_view to_string(PipelineSchedule s) { return word_of(kSchedules, s); }

Result<Precision> parse_precision(std::string_view text, std::string_view field) {
  return parse_word(kPrecisions, text, field);
}
Result<ActivationCheckpointing> parse_activation_checkpointing(std::string_view text, std::string_view field) {
  return parse_word(kCheckpointing, text, field);
}
Result<DeviceKind> parse_device(std::string_view text, std::string_view field) {
  return parse_word(kDevices, text, field);
}
Result<FsdpGradSync> parse_fsdp_grad_sync(std::string_view text, std::string_view field) {
  return parse_word(kGradSyncs, text, field);
}
Result<WeightInit> parse_weight_init(std::string_view text, std::string_view field) {
  return parse_word(kWeightInits, text, field);
}
Result<PipelineSchedule> parse_pipeline_schedule(std::string_view text, std::string_view field) {
  return parse_word(kSchedules, text, field);
}

int RunConfig::world_size() const {
  if (nodes.empty()) return static_cast<int>(mesh.world_size());
  int n = 0;
  for (const NodeConfig& node : nodes) n += node.slots;
  return n;
}

nlohmann::json to_json(const RunConfig& c) {
  const nlohmann::json mesh = to_json(c.mesh);
  const TrainingConfig& t = c.training;
  nlohmann::json training = {
      {"steps", t.steps},
      {"seq_len", t.seq_len},
      {"global_batch", t.global_batch},
      {"micro_batch", t.micro_batch},
      {"lr", t.lr},
      {"warmup_steps", t.warmup_steps},
      {"seed", t.seed},
      {"precision", to_string(t.precision)},
      {"activation_checkpointing", to_string(t.activation_checkpointing)},
      {"device", to_string(t.device)},
      {"checkpoint_every", t.checkpoint_every},
      {"sequence_parallel", t.sequence_parallel},
      {"fsdp_grad_sync", to_string(t.fsdp_grad_sync)},
      {"max_grad_norm", t.max_grad_norm},
      {"weight_decay", t.weight_decay},
      {"peak_tflops", t.peak_tflops},
      {"init", to_string(t.init)},
      {"eval_every", t.eval_every},
      {"eval_batches", t.eval_batches},
  };
  // Only when set: a config without stages is written exactly as before pp existed.
  if (t.pp_schedule != PipelineSchedule::one_f_one_b) training["pp_schedule"] = to_string(t.pp_schedule);
  if (t.pp_virtual_stages != 1) training["pp_virtual_stages"] = t.pp_virtual_stages;
  if (t.collective_timeout != TrainingConfig{}.collective_timeout) training["collective_timeout"] = t.collective_timeout;
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeConfig& n : c.nodes) {
    nlohmann::json node = n.extra.is_object() ? n.extra : nlohmann::json::object();
    node["host"] = n.host;
    node["slots"] = n.slots;
    nodes.push_back(node);
  }
  nlohmann::json cluster = {{"nodes", nodes}};
  // Only for a Slurm partition or a described cluster: an SSH config is written exactly as
  // before the source existed.
  if (!std::holds_alternative<SshNodesSource>(c.source)) cluster["source"] = to_json(c.source);
  return {{"v", RunConfig::kVersion}, {"name", c.name},         {"model", c.model},
          {"mesh", mesh},             {"training", training},   {"data", c.data},
          {"eval_data", c.eval_data}, {"save_hf", c.save_hf},   {"cluster", cluster}};
}

namespace {

std::string dump_value(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Reads an integer field `key` of `obj` into `out`, checking `min`. Absent keys keep the default.
Status read_int(const nlohmann::json& obj, const std::string& prefix, const char* key, int min,
                int& out) {
  if (!obj.contains(key)) return {};
  const nlohmann::json& v = obj.at(key);
  if (!v.is_number_integer())
    return Error{prefix + key, dump_value(v), "must be a whole number"};
  const int64_t x = v.get<int64_t>();
  if (x < min || x > INT32_MAX)
    return Error{prefix + key, std::to_string(x),
                 "must be a whole number >= " + std::to_string(min)};
  out = static_cast<int>(x);
  return {};
}

}  // namespace

Status check_model_reference(std::string_view field, std::string_view value) {
  if (value.empty())
    return Error{std::string(field), std::string(value), "a preset name or a path to config.json"};
  return {};
}

Result<RunConfig> run_config_from_json(const nlohmann::json& doc) {
  if (!doc.is_object()) return Error{"run config", dump_value(doc), "must be a JSON object"};
  RunConfig c;
  if (doc.contains("v")) {
    const auto& v = doc.at("v");
    if (!v.is_number_integer() || v.get<int>() != RunConfig::kVersion)
      return Error{"v", dump_value(v), "only version 1 run configs are supported"};
  }
  if (doc.contains("name")) {
    if (!doc.at("name").is_string()) return Error{"name", dump_value(doc.at("name")), "must be a string"};
    c.name = doc.at("name").get<std::string>();
  }
  if (doc.contains("model")) {
    const auto& m = doc.at("model");
    if (!m.is_string() && !m.is_object())
      return Error{"model", dump_value(m), "must be a preset name, a path, or a config.json object"};
    if (m.is_string())
      if (Status s = check_model_reference("model", m.get<std::string>()); !s) return s.error();
    c.model = m;
  }
  if (doc.contains("mesh")) {
    auto mesh = mesh_shape_from_json(doc.at("mesh"));
    if (!mesh) return mesh.error();
    c.mesh = *mesh;
  }
  if (doc.contains("training")) {
    const auto& t = doc.at("training");
    if (!t.is_object()) return Error{"training", dump_value(t), "must be an object"};
    const std::string p = "training.";
    TrainingConfig& tc = c.training;
    for (auto [key, min, out] : {std::tuple{"steps", 1, &tc.steps},
                                 std::tuple{"seq_len", 1, &tc.seq_len},
                                 std::tuple{"global_batch", 1, &tc.global_batch},
                                 std::tuple{"micro_batch", 1, &tc.micro_batch},
                                 std::tuple{"warmup_steps", 0, &tc.warmup_steps},
                                 std::tuple{"checkpoint_every", 0, &tc.checkpoint_every},
                                 std::tuple{"eval_every", 0, &tc.eval_every},
                                 std::tuple{"eval_batches", 0, &tc.eval_batches},
                                 std::tuple{"pp_virtual_stages", 1, &tc.pp_virtual_stages},
                                 std::tuple{"collective_timeout", 1, &tc.collective_timeout}}) {
      if (Status s = read_int(t, p, key, min, *out); !s) return s.error();
    }
    if (t.contains("lr")) {
      const auto& v = t.at("lr");
      if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > kMaxLearningRate)
        return Error{p + "lr", dump_value(v), "must be a number in (0, 10]"};
      tc.lr = v.get<double>();
    }
    if (t.contains("seed")) {
      const auto& v = t.at("seed");
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        return Error{p + "seed", dump_value(v), "must be a whole number >= 0"};
      tc.seed = v.get<uint64_t>();
    }
    auto read_word = [&](const char* key, auto parse, auto& out) -> Status {
      if (!t.contains(key)) return {};
      const auto& v = t.at(key);
      if (!v.is_string()) return Error{p + key, dump_value(v), "must be a string"};
      auto r = parse(v.template get<std::string>(), p + key);
      if (!r) return r.error();
      out = *r;
      return {};
    };
    if (Status s = read_word("precision", parse_precision, tc.precision); !s) return s.error();
    if (Status s = read_word("activation_checkpointing", parse_activation_checkpointing,
                             tc.activation_checkpointing); !s)
      return s.error();
    if (Status s = read_word("device", parse_device, tc.device); !s) return s.error();
    if (Status s = read_word("fsdp_grad_sync", parse_fsdp_grad_sync, tc.fsdp_grad_sync); !s) return s.error();
    if (Status s = read_word("init", parse_weight_init, tc.init); !s) return s.error();
    if (Status s = read_word("pp_schedule", parse_pipeline_schedule, tc.pp_schedule); !s) return s.error();
    if (t.contains("sequence_parallel")) {
      const auto& v = t.at("sequence_parallel");
      if (!v.is_boolean()) return Error{p + "sequence_parallel", dump_value(v), "must be true or false"};
      tc.sequence_parallel = v.get<bool>();
    }
    if (t.contains("weight_decay")) {
      const auto& v = t.at("weight_decay");
      if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > kMaxWeightDecay)
        return Error{p + "weight_decay", dump_value(v), "must be a number from 0 to 1"};
      tc.weight_decay = v.get<double>();
    }
    for (auto [key, out] : {std::pair{"max_grad_norm", &tc.max_grad_norm}, std::pair{"peak_tflops", &tc.peak_tflops}}) {
      if (!t.contains(key)) continue;
      const auto& v = t.at(key);
      if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 1e9)
        return Error{p + key, dump_value(v), "must be a number >= 0"};
      *out = v.get<double>();
    }
  }
  if (doc.contains("data")) {
    const auto& d = doc.at("data");
    if (!d.is_null() && !d.is_string() && !d.is_object())
      return Error{"data", dump_value(d), "must be a path, an object, or null"};
    // An empty path names nothing: the bundled corpus, as null says (the fuzzer found "" could
    // not be written back as --data).
    c.data = d.is_string() && d.get<std::string>().empty() ? nlohmann::json(nullptr) : d;
  }
  if (doc.contains("eval_data")) {
    const auto& d = doc.at("eval_data");
    if (!d.is_null() && !d.is_string()) return Error{"eval_data", dump_value(d), "must be a path or null"};
    c.eval_data = d;
  }
  if (doc.contains("save_hf")) {
    const auto& d = doc.at("save_hf");
    if (!d.is_null() && !d.is_string()) return Error{"save_hf", dump_value(d), "must be a directory path or empty"};
    c.save_hf = d.is_string() ? d.get<std::string>() : "";
  }
  if (doc.contains("cluster")) {
    const auto& cl = doc.at("cluster");
    if (!cl.is_object()) return Error{"cluster", dump_value(cl), "must be an object"};
    if (cl.contains("source")) {
      auto source = cluster_source_from_json(cl.at("source"), "cluster.source");
      if (!source) return source.error();
      c.source = *source;
    }
    if (cl.contains("nodes")) {
      const auto& nodes = cl.at("nodes");
      if (!nodes.is_array()) return Error{"cluster.nodes", dump_value(nodes), "must be an array"};
      for (size_t i = 0; i < nodes.size(); ++i) {
        const auto& n = nodes[i];
        const std::string f = "cluster.nodes[" + std::to_string(i) + "]";
        if (!n.is_object() || !n.contains("host") || !n.at("host").is_string() ||
            n.at("host").get<std::string>().empty())
          return Error{f + ".host", n.is_object() && n.contains("host") ? dump_value(n.at("host")) : "",
                       "each node needs a non-empty \"host\" string"};
        NodeConfig node;
        node.host = n.at("host").get<std::string>();
        if (Status s = read_int(n, f + ".", "slots", 1, node.slots); !s) return s.error();
        node.extra = n;
        node.extra.erase("host");
        node.extra.erase("slots");
        c.nodes.push_back(std::move(node));
      }
    }
  }
  return c;
}

Result<RunConfig> load_run_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Error{"config", path.string(), "cannot be opened for reading"}.as(ErrorKind::io);
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error{"config", path.string(), "is not valid JSON"};
  return run_config_from_json(doc);
}

Status save_run_config(const RunConfig& config, const std::filesystem::path& path) {
  // Write to a temporary file and rename, so a crash never leaves a torn config.
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return Error{"config", path.string(), "cannot be opened for writing"}.as(ErrorKind::io);
    out << to_json(config).dump(2) << '\n';
    if (!out) return Error{"config", path.string(), "could not be written"}.as(ErrorKind::io);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Error{"config", path.string(), "could not be written: " + ec.message()}.as(ErrorKind::io);
  return {};
}

}  // namespace meshwork
