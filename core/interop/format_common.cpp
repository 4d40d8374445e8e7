#include "core/interop/format_common.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>

#include "core/model_spec.h"
#include "core/shell_quote.h"

namespace meshwork::interop::detail {

std::optional<Error> pure_replication_refusal(const MeshShape& mesh, std::string_view tool, bool cp_counts) {
  const bool sharded_model = mesh[Axis::tp] > 1 || (cp_counts && mesh[Axis::cp] > 1);
  if (mesh[Axis::dp_replicate] > 1 && mesh[Axis::dp_shard] == 1 && sharded_model) {
    return Error{"dp_shard", "1",
                 std::string(tool) + " refuses tp" + (cp_counts ? "/cp" : "") +
                     " with pure replication (dp_replicate > 1, dp_shard = 1): its DDP wrapper "
                     "cannot hold sharded parameters; shard instead (move the replicas to "
                     "dp_shard, or use dp_shard > 1 with dp_replicate for HSDP)"};
  }
  return std::nullopt;
}

Status check_request(const ExportRequest& request) {
  const MeshShape& mesh = request.config.mesh;
  for (Axis a : kAxes) {
    if (mesh[a] < 1)
      return Error{std::string(axis_name(a)), std::to_string(mesh[a]), "a resolved size >= 1 (plan the shape first)"};
  }
  if (request.num_machines < 1)
    return Error{"nodes", std::to_string(request.num_machines), "at least 1"};
  if (request.processes_per_machine < 1)
    return Error{"processes per node", std::to_string(request.processes_per_machine), "at least 1"};
  const int64_t world = int64_t{request.num_machines} * request.processes_per_machine;
  if (mesh.world_size() != world)
    return Error{"mesh", mesh.to_string(),
                 "the product of the sizes must equal nodes x processes per node (" + std::to_string(world) + ")"};
  return Status{};
}

std::optional<std::string> hugging_face_model(const nlohmann::json& model) {
  if (!model.is_string()) return std::nullopt;
  const std::string name = model.get<std::string>();
  const std::filesystem::path preset = preset_dir() / (name + ".json");
  std::error_code ec;
  if (name.find('/') == std::string::npos && std::filesystem::is_regular_file(preset, ec)) {
    std::ifstream in(preset);
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    if (doc.is_object() && doc.contains("_source") && doc["_source"].is_string()) {
      static const std::regex id(R"(huggingface\.co/([^/\s]+/[^/\s]+))");
      std::smatch m;
      const std::string source = doc["_source"].get<std::string>();
      if (std::regex_search(source, m, id)) return m[1].str();
    }
    return std::nullopt;  // a test preset (tiny, small): no public weights
  }
  return name;  // a directory or an id the user typed
}

std::string preset_for_model(const std::string& id) {
  // Every preset's id is "owner/name" (the pattern above): anything else names no preset, and
  // needs no look at the files.
  if (id.find('/') == std::string::npos) return id;
  // The presets are read-only files bundled with the program: their ids are read once per preset
  // folder, not once per import (a config repeating base_model would read them all each time).
  static std::mutex mutex;
  static std::map<std::string, std::map<std::string, std::string>> preset_by_id_per_dir;
  const std::string dir = preset_dir().string();
  std::lock_guard lock(mutex);
  auto [table, fresh] = preset_by_id_per_dir.try_emplace(dir);
  if (fresh) {
    for (const std::string& preset : preset_names())
      if (auto preset_id = hugging_face_model(preset)) table->second.try_emplace(*preset_id, preset);
  }
  auto found = table->second.find(id);
  return found == table->second.end() ? id : found->second;
}

std::string decoder_layer_class(const nlohmann::json& model) {
  auto spec = model_spec_from_run_model(model);
  if (spec) {
    if (spec->architecture == "mistral") return "MistralDecoderLayer";
    if (spec->architecture == "qwen2") return "Qwen2DecoderLayer";
  }
  return "LlamaDecoderLayer";
}

std::string export_header(const ExportRequest& r, const std::vector<std::string>& notes) {
  return comment_block("Written by Meshwork: " + r.config.mesh.to_string() + " on " + std::to_string(r.num_machines) +
                           " node(s) x " + std::to_string(r.processes_per_machine) + " process(es)",
                       notes);
}

std::string comment_block(const std::string& title, const std::vector<std::string>& lines) {
  if (lines.empty()) return {};
  std::string out = "# " + title + "\n";
  for (const std::string& l : lines) out += "#   " + l + "\n";
  return out + "\n";
}

std::string yaml_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string yaml_scalar(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  return plain ? std::string(text) : yaml_quote(text);
}

Result<int> grad_accum_steps(const RunConfig& config) {
  const TrainingConfig& t = config.training;
  const int64_t per_step = int64_t{t.micro_batch} * config.mesh[Axis::dp_replicate] * config.mesh[Axis::dp_shard];
  if (per_step <= 0 || t.global_batch % per_step != 0)
    return Error{"training.global_batch", std::to_string(t.global_batch),
                 "a multiple of micro_batch x dp_replicate x dp_shard (" + std::to_string(per_step) + ")"};
  return static_cast<int>(t.global_batch / per_step);
}

std::string torchrun_line(const ExportRequest& r, int node_rank, const std::string& tail) {
  return "torchrun --nnodes " + std::to_string(r.num_machines) + " --nproc-per-node " +
         std::to_string(r.processes_per_machine) + " --node-rank " + std::to_string(node_rank) + " --master-addr " +
         shell_quote(r.main_address) + " --master-port " + std::to_string(r.main_port) + " " + tail;
}

std::string launch_config_file(const ExportRequest& r, ConfigFormat format) {
  return shell_quote(r.config_file.empty() ? std::string(default_file_name(format)) : r.config_file);
}

std::string number_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  // A float stays a float for the typed readers (torchtitan's max_norm: 1.0, not 1).
  if (std::isfinite(v) && s.find_first_of(".e") == std::string::npos) s += ".0";
  // YAML 1.1 (PyYAML) reads "3e-05" as a string: it wants a dot in the mantissa and a sign.
  const auto e = s.find('e');
  if (e != std::string::npos) {
    std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
    if (mantissa.find('.') == std::string::npos) mantissa += ".0";
    if (exponent[0] != '-' && exponent[0] != '+') exponent = "+" + exponent;
    s = mantissa + "e" + exponent;
  }
  return s;
}

Error yaml_error(std::string_view name, const YAML::Node& node, std::string_view key, std::string_view value,
                 std::string_view allowed) {
  const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
  std::string where = std::string(name) + (line > 0 ? ":" + std::to_string(line) : "") + ": " + std::string(key);
  return Error{where, std::string(value), std::string(allowed)};
}

namespace {
std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "null";
}
}  // namespace

Result<int> yaml_int(const YAML::Node& node, std::string_view name, std::string_view key, int min) {
  int v = 0;
  const std::string text = scalar_text(node);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!node.IsScalar() || ec != std::errc{} || end != text.data() + text.size() || v < min)
    return yaml_error(name, node, key, text, "a whole number >= " + std::to_string(min));
  return v;
}

Result<double> yaml_double(const YAML::Node& node, std::string_view name, std::string_view key) {
  const std::string text = scalar_text(node);
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!node.IsScalar() || ec != std::errc{} || end != text.data() + text.size() || !(v >= 0) || v > 1e9)
    return yaml_error(name, node, key, text, "a number >= 0");
  return v;
}

Result<bool> yaml_bool(const YAML::Node& node, std::string_view name, std::string_view key) {
  const std::string text = scalar_text(node);
  for (const char* t : {"true", "True", "TRUE", "yes", "on"})
    if (text == t) return true;
  for (const char* f : {"false", "False", "FALSE", "no", "off"})
    if (text == f) return false;
  return yaml_error(name, node, key, text, "true or false");
}

Result<std::string> yaml_string(const YAML::Node& node, std::string_view name, std::string_view key) {
  if (!node.IsScalar()) return yaml_error(name, node, key, scalar_text(node), "a text value");
  return node.Scalar();
}

}  // namespace meshwork::interop::detail
