// Internal to core/interop: what the three formats share (the refusal of shapes a tool cannot
// start, model naming, YAML reading with line numbers in the errors).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/interop/ecosystem_config.h"

// lhs = *expr, or return expr's Error from the enclosing function.
#define INTEROP_TRY(lhs, expr)            \
  do {                                    \
    auto interop_r_ = (expr);             \
    if (!interop_r_.ok()) return interop_r_.error(); \
    lhs = *interop_r_;                    \
  } while (0)

namespace meshwork::interop::detail {

Result<ExportedConfig> export_accelerate(const ExportRequest& request);
Result<ExportedConfig> export_axolotl(const ExportRequest& request);
Result<ExportedConfig> export_torchtitan(const ExportRequest& request);
Result<ImportedConfig> import_accelerate(const YAML::Node& root, std::string_view name);
Result<ImportedConfig> import_axolotl(const YAML::Node& root, std::string_view name);
Result<ImportedConfig> import_torchtitan(std::string_view text, std::string_view name);

// Accelerate (ParallelismConfig) and torchtitan (DDP "has not supported > 1D parallelism") both
// wrap pure replication in DDP, which cannot hold tp- or cp-sharded parameters; meshtrain runs
// such shapes, these tools do not. The Error names the axis and what the tool takes instead.
std::optional<Error> pure_replication_refusal(const MeshShape& mesh, std::string_view tool,
                                              bool cp_counts = true);

// The checks every export shares: mesh resolved and equal to machines x processes.
Status check_request(const ExportRequest& request);

// The Hugging Face id of a bundled preset (from its "_source" address), the directory or id the
// run config names otherwise; nullopt for an inline config or a preset with no public weights.
std::optional<std::string> hugging_face_model(const nlohmann::json& model);
// The bundled preset whose public checkpoint is `id` ("meta-llama/Llama-3.1-8B" ->
// "llama-3.1-8b"), so a config naming a hub id plans without a download; `id` itself otherwise.
std::string preset_for_model(const std::string& id);
// The transformers decoder layer class FSDP wraps (LlamaDecoderLayer, ...), from the model's
// architecture when Meshwork can read it; LlamaDecoderLayer otherwise.
std::string decoder_layer_class(const nlohmann::json& model);

// The file's opening comment: what was planned, on what, and the notes.
std::string export_header(const ExportRequest& r, const std::vector<std::string>& notes);
// "# line" for each line, then a blank line; "" when there are none.
std::string comment_block(const std::string& title, const std::vector<std::string>& lines);
// A YAML double-quoted scalar (paths and ids the user typed).
std::string yaml_quote(std::string_view text);
// `text` as a YAML scalar: plain when it is only letters, digits and . _ - (an address, a name),
// else yaml_quote()d, so a host name never adds keys or comments to the file.
std::string yaml_scalar(std::string_view text);
// Global batch = micro x accumulation x data-parallel ranks: the accumulation steps, or an Error
// naming training.global_batch when it does not divide.
Result<int> grad_accum_steps(const RunConfig& config);
// "torchrun --nnodes ... --node-rank i ... <tail>" for node i.
std::string torchrun_line(const ExportRequest& r, int node_rank, const std::string& tail);
// The config file the launch lines name (request.config_file, else the format's default), quoted
// for a POSIX shell as every command line Meshwork writes (core/shell_quote.h).
std::string launch_config_file(const ExportRequest& r, ConfigFormat format);
// A double as the shortest text that reads back to the same value (3e-4 -> "0.0003").
std::string number_text(double v);

// YAML reading: every value error names `name:line: key`.
Error yaml_error(std::string_view name, const YAML::Node& node, std::string_view key,
                 std::string_view value, std::string_view allowed);
Result<int> yaml_int(const YAML::Node& node, std::string_view name, std::string_view key, int min = 1);
Result<double> yaml_double(const YAML::Node& node, std::string_view name, std::string_view key);
Result<bool> yaml_bool(const YAML::Node& node, std::string_view name, std::string_view key);
Result<std::string> yaml_string(const YAML::Node& node, std::string_view name, std::string_view key);

}  // namespace meshwork::interop::detail
