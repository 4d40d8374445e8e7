// The ecosystem's config formats, in and out: a shape planned in Meshwork written as an
// Accelerate config YAML, an Axolotl YAML fragment or a torchtitan TOML (plus the per-node launch
// command lines), and the same files read back to pre-fill a plan. The run config (RunConfig) is
// the one value on Meshwork's side; the per-format files (accelerate_config.cpp,
// axolotl_config.cpp, torchtitan_config.cpp) only map its fields to the tool's keys and back.
//
// Parsing uses Debian's yaml-cpp and toml++ (this library only: meshtrain never links them).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/run_config.h"

namespace meshwork::interop {

enum class ConfigFormat { accelerate, axolotl, torchtitan };
std::string_view to_string(ConfigFormat f);  // "accelerate" | "axolotl" | "torchtitan"
Result<ConfigFormat> parse_config_format(std::string_view text, std::string_view field = "--export");
std::string_view default_file_name(ConfigFormat f);  // accelerate_config.yaml, axolotl.yaml, torchtitan.toml

// What an export writes about: the run config (model, mesh, training) and where it runs.
struct ExportRequest {
  RunConfig config;       // mesh resolved (no -1); training settings as planned
  int num_machines = 1;   // nodes
  int processes_per_machine = 1;
  std::string main_address = "NODE0_ADDRESS";  // the first node's address, for the launch lines
  int main_port = 29500;
  std::string script = "train.py";  // the user's training script (Accelerate, torchrun)
  // The config file the launch lines name: the file actually written (`--out`, the dialog's
  // Save), so the printed lines run as they are; empty: default_file_name(format).
  std::string config_file;
};

struct ExportedConfig {
  ConfigFormat format = ConfigFormat::accelerate;
  std::string text;                         // the file's contents
  std::vector<std::string> launch_commands;  // one per node, node rank 0 first
  // Settings the format has no key for (they belong in the user's script or elsewhere), each a
  // sentence; written as comments at the top of the file too.
  std::vector<std::string> notes;
};

// The shape and settings as a file of `format`. A shape the tool would refuse at start (e.g.
// Accelerate and torchtitan with tp/cp on pure replication) is an Error naming the axis and
// what the tool accepts instead, never a file that fails later.
Result<ExportedConfig> export_config(const ExportRequest& request, ConfigFormat format);

// What a file of one of the formats says, field by field; unset where it is silent.
struct ImportedConfig {
  ConfigFormat format = ConfigFormat::accelerate;
  std::optional<std::string> model;  // a preset name, a Hugging Face id or a path
  std::optional<MeshShape> mesh;     // one axis may be -1 (torchtitan's "the rest")
  std::optional<int> seq_len, micro_batch, global_batch, grad_accum_steps, steps, warmup_steps;
  std::optional<double> lr;
  std::optional<Precision> precision;
  std::optional<ActivationCheckpointing> activation_checkpointing;
  std::optional<DeviceKind> device;
  std::optional<int> num_machines, num_processes;  // Accelerate: total processes
  // Dotted paths of keys Meshwork does not use ("datasets", "fsdp_config.fsdp_offload_params"):
  // listed for the user, never fatal.
  std::vector<std::string> unknown_keys;
  // Values taken approximately (e.g. torchtitan's selective activation checkpointing read as
  // full), each a sentence.
  std::vector<std::string> notes;

  // Sets every field the file gave; leaves the rest of `config` as it was. The global batch is
  // the file's, or micro_batch x grad_accum_steps x (dp_replicate x dp_shard) when it gives the
  // parts and the mesh is resolved.
  void apply_to(RunConfig& config) const;
};

// Reads `path`, choosing the format from its extension and keys (.toml: torchtitan; YAML with
// distributed_type / parallelism_config / compute_environment: Accelerate; other YAML: Axolotl)
// unless `format` is given. A malformed file or a value of the wrong type is an Error naming the
// file, the line and the key.
Result<ImportedConfig> import_config(const std::filesystem::path& path,
                                     std::optional<ConfigFormat> format = std::nullopt);
// The same from text; `name` stands for the file in messages.
Result<ImportedConfig> import_config_text(std::string_view text, std::string_view name,
                                          std::optional<ConfigFormat> format = std::nullopt);

}  // namespace meshwork::interop
