#include "core/interop/ecosystem_config.h"

#include <fstream>
#include <sstream>

#include "core/interop/format_common.h"

namespace meshwork::interop {

namespace {

// Each format's word (the CLI's and the API's) and the file name it is written to by default.
struct FormatInfo {
  ConfigFormat format;
  std::string_view name;
  std::string_view file_name;
};
constexpr FormatInfo kFormats[] = {
    {ConfigFormat::accelerate, "accelerate", "accelerate_config.yaml"},
    {ConfigFormat::axolotl, "axolotl", "axolotl.yaml"},
    {ConfigFormat::torchtitan, "torchtitan", "torchtitan.toml"},
};

const FormatInfo* find_format(ConfigFormat f) {
  for (const FormatInfo& i : kFormats)
    if (i.format == f) return &i;
  return nullptr;
}

}  // namespace

std::string_view to_string(ConfigFormat f) {
  const FormatInfo* i = find_format(f);
  return i ? i->name : "accelerate";
}

Result<ConfigFormat> parse_config_format(std::string_view text, std::string_view field) {
  for (const FormatInfo& i : kFormats)
    if (text == i.name) return i.format;
  return Error{std::string(field), std::string(text), "accelerate, axolotl or torchtitan"};
}

std::string_view default_file_name(ConfigFormat f) {
  const FormatInfo* i = find_format(f);
  return i ? i->file_name : "config";
}

Result<ExportedConfig> export_config(const ExportRequest& request, ConfigFormat format) {
  if (Status s = detail::check_request(request); !s.ok()) return s.error();
  switch (format) {
    case ConfigFormat::accelerate: return detail::export_accelerate(request);
    case ConfigFormat::axolotl: return detail::export_axolotl(request);
    case ConfigFormat::torchtitan: return detail::export_torchtitan(request);
  }
  return Error{"format", "", "accelerate, axolotl or torchtitan"};
}

namespace {

bool looks_like_accelerate(const YAML::Node& root) {
  for (const char* key : {"distributed_type", "parallelism_config", "compute_environment", "num_processes"})
    if (root[key]) return true;
  return false;
}

}  // namespace

Result<ImportedConfig> import_config_text(std::string_view text, std::string_view name,
                                          std::optional<ConfigFormat> format) {
  const std::string file(name);
  if (!format) {
    const bool toml = file.size() >= 5 && file.compare(file.size() - 5, 5, ".toml") == 0;
    if (toml) format = ConfigFormat::torchtitan;
  }
  if (format == ConfigFormat::torchtitan) return detail::import_torchtitan(text, name);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return Error{file + ":" + std::to_string(e.mark.line + 1), "", "not valid YAML (" + e.msg + ")"};
  }
  if (!root.IsMap())
    return Error{file, "", "a YAML mapping of keys (an Accelerate config or an Axolotl config) was expected"};
  if (!format) format = looks_like_accelerate(root) ? ConfigFormat::accelerate : ConfigFormat::axolotl;
  try {
    return *format == ConfigFormat::accelerate ? detail::import_accelerate(root, name)
                                               : detail::import_axolotl(root, name);
  } catch (const YAML::Exception& e) {  // yaml-cpp throws on odd node shapes; never let it out
    return Error{file + ":" + std::to_string(e.mark.line + 1), "", e.msg};
  }
}

Result<ImportedConfig> import_config(const std::filesystem::path& path, std::optional<ConfigFormat> format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path.string(), "", "cannot be read"}.as(ErrorKind::io);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string body = text.str();
  if (body.size() > (16u << 20)) return Error{path.string(), std::to_string(body.size()) + " bytes", "a config file under 16 MiB"};
  return import_config_text(body, path.string(), format);
}

void ImportedConfig::apply_to(RunConfig& config) const {
  if (model) config.model = *model;
  if (mesh) config.mesh = *mesh;
  TrainingConfig& t = config.training;
  if (seq_len) t.seq_len = *seq_len;
  if (micro_batch) t.micro_batch = *micro_batch;
  if (steps) t.steps = *steps;
  if (warmup_steps) t.warmup_steps = *warmup_steps;
  if (lr) t.lr = *lr;
  if (precision) t.precision = *precision;
  if (activation_checkpointing) t.activation_checkpointing = *activation_checkpointing;
  if (device) t.device = *device;
  if (global_batch) {
    t.global_batch = *global_batch;
  } else if (grad_accum_steps || micro_batch) {
    // global = micro x accumulation x data-parallel ranks (each dp rank reads its own samples).
    const MeshShape& m = config.mesh;
    if (m[Axis::dp_replicate] > 0 && m[Axis::dp_shard] > 0)
      t.global_batch = t.micro_batch * grad_accum_steps.value_or(1) * m[Axis::dp_replicate] * m[Axis::dp_shard];
  }
}

}  // namespace meshwork::interop
