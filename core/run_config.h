// The run configuration: the one contract between the workbench, the launcher and the trainer.
// The workbench saves and loads it, `meshwork launch --config` reads it, the launcher ships it
// to every node as run_config.json, `meshtrain --config` runs it, meshtrain reports it back in
// its start record, and the store keeps it with the run (docs/design.md).
//
// {"v":1, "name":"...", "model":"tiny" | {<HF config.json>}, "mesh":{"dp_replicate":1,...[,"pp":N]},
//  "training":{"steps":..,"seq_len":..,"global_batch":..,"micro_batch":..,"lr":..,"warmup_steps":..,
//              "seed":..,"precision":"fp32|bf16","activation_checkpointing":"none|full",
//              "device":"cpu|cuda","checkpoint_every":..,"sequence_parallel":true,
//              "fsdp_grad_sync":"micro-batch|step","max_grad_norm":..,"weight_decay":..,"peak_tflops":..,
//              "init":"auto|hf|random","eval_every":..,"eval_batches":..,
//              "pp_schedule":"gpipe|1f1b|interleaved-1f1b","pp_virtual_stages":..},
//  "data": "<path>" | null, "eval_data": "<path>" | null, "save_hf": "<dir>" | "",
//  "cluster":{["source":{"kind":"slurm",...},] "nodes":[{"host":"...","slots":N, ...}]}}
//  (core/cluster_source.h: "source" only for a Slurm partition; without it the nodes are SSH nodes)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster_source.h"
#include "core/error.h"
#include "core/mesh.h"

namespace meshwork {

enum class Precision { fp32, bf16 };
enum class ActivationCheckpointing { none, full };
enum class DeviceKind { cpu, cuda };
// FSDP with gradient accumulation: reduce-scatter every micro-batch (FSDP2's default, shard-sized
// gradients) or once per step (less traffic; every unit's unsharded fp32 gradient held between
// micro-batches).
enum class FsdpGradSync { micro_batch, step };
// Where the initial weights come from: the model directory's Hugging Face checkpoint (hf), the
// seed (random), or hf when the model is a directory holding weights and random otherwise (auto).
enum class WeightInit { auto_, hf, random };
// The order micro-batches go through the pipeline stages (pp > 1), docs/pipeline.md:
//   gpipe: every forward, then every backward (all micro-batches' activations in flight);
//   1f1b: after pp - s warm-up forwards, stage s alternates one forward and one backward
//         (at most pp - s micro-batches in flight; the same bubble as gpipe);
//   interleaved-1f1b: each rank holds V chunks of layers (virtual stages) and runs 1f1b over
//         the pp * V chunks (the bubble shrinks V-fold; more sends).
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved_1f1b };

std::string_view to_string(Precision p);
std::string_view to_string(ActivationCheckpointing a);
std::string_view to_string(DeviceKind d);
std::string_view to_string(FsdpGradSync s);  // "micro-batch" | "step"
std::string_view to_string(WeightInit w);    // "auto" | "hf" | "random"
std::string_view to_string(PipelineSchedule s);  // "gpipe" | "1f1b" | "interleaved-1f1b"
// Parsers return an Error naming `field` when the text is not one of the allowed words.
Result<Precision> parse_precision(std::string_view text, std::string_view field = "precision");
Result<ActivationCheckpointing> parse_activation_checkpointing(
    std::string_view text, std::string_view field = "activation_checkpointing");
Result<DeviceKind> parse_device(std::string_view text, std::string_view field = "device");
Result<FsdpGradSync> parse_fsdp_grad_sync(std::string_view text, std::string_view field = "fsdp_grad_sync");
Result<WeightInit> parse_weight_init(std::string_view text, std::string_view field = "init");
Result<PipelineSchedule> parse_pipeline_schedule(std::string_view text, std::string_view field = "pp_schedule");

// The largest learning rate a run config may hold (the file reader and the --lr flag alike).
inline constexpr double kMaxLearningRate = 10;
// The largest weight decay a run config may hold (torch's AdamW takes any; beyond 1 a weight
// changes sign within a step at lr 1, which no user means).
inline constexpr double kMaxWeightDecay = 1;

struct TrainingConfig {
  int steps = 100;
  int seq_len = 256;
  int global_batch = 8;   // sequences per optimizer step, over the whole mesh
  int micro_batch = 1;    // sequences per forward/backward on one data-parallel rank
  double lr = 3e-4;
  int warmup_steps = 10;
  uint64_t seed = 1234;
  Precision precision = Precision::fp32;
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  DeviceKind device = DeviceKind::cpu;
  int checkpoint_every = 0;  // 0: no checkpoints
  bool sequence_parallel = true;  // tp > 1: norms and residuals on sequence shards over tp
  FsdpGradSync fsdp_grad_sync = FsdpGradSync::micro_batch;
  double max_grad_norm = 1.0;     // clip to this global L2 norm; 0: off
  // AdamW's decoupled weight decay: each step multiplies a weight by 1 - lr * weight_decay.
  // At most kMaxWeightDecay, so that with the largest lr the factor stays >= 0 only for sane
  // runs; 0 turns it off.
  double weight_decay = 0.1;
  double peak_tflops = 0;         // one rank's peak for MFU; 0: a matmul measured at start
  WeightInit init = WeightInit::auto_;  // initial weights: checkpoint (hf) or seed (random)
  // Validation on the held-out data (RunConfig::eval_data): every eval_every steps (0: only at
  // the end) and at the end; eval_batches global batches of sequences each time (0: every
  // held-out sequence once).
  int eval_every = 0;
  int eval_batches = 0;
  // With pp > 1 (mesh.pp): the schedule, and for interleaved-1f1b the chunks of layers per rank
  // (>= 2; 1 for the others). Written to the file only when they are not the defaults.
  PipelineSchedule pp_schedule = PipelineSchedule::one_f_one_b;
  int pp_virtual_stages = 1;
  // meshtrain's watchdog: a rank inside one collective longer than this many seconds names the
  // group members that never entered it (or a mismatch) and stops the run. The default fires
  // before Gloo's own 5 minute timeout. Written to the file only when not the default.
  int collective_timeout = 240;
  bool operator==(const TrainingConfig&) const = default;
};

struct NodeConfig {
  std::string host;         // "local", "user@host:port", an ssh_config alias
  int slots = 1;            // ranks on this node
  nlohmann::json extra = nlohmann::json::object();  // anything else the GUI/launcher keeps
};

struct RunConfig {
  static constexpr int kVersion = 1;
  std::string name;
  nlohmann::json model = "tiny";  // preset name / path (string) or an inline HF config (object)
  MeshShape mesh;
  TrainingConfig training;
  nlohmann::json data = nullptr;  // path to a .bin shard or a directory; null: bundled corpus
  nlohmann::json eval_data = nullptr;  // held-out shards (same format as data); null: no evaluation
  std::string save_hf;            // non-empty: export the final weights there as a Hugging Face directory
  std::vector<NodeConfig> nodes;  // empty: the local machine
  ClusterSource source;           // where the nodes come from: SSH nodes, or a Slurm partition

  int world_size() const;  // sum of node slots, or the mesh product when no nodes are given
};

nlohmann::json to_json(const RunConfig& config);
// Unknown keys are ignored; a wrong type or value is an Error naming e.g. "training.seq_len".
Result<RunConfig> run_config_from_json(const nlohmann::json& doc);
// The rule for a model given by name or path, whichever door it comes in by (the file's "model",
// the --model flag): a non-empty string. `field` is the name the caller's user wrote.
Status check_model_reference(std::string_view field, std::string_view value);
Result<RunConfig> load_run_config(const std::filesystem::path& path);
Status save_run_config(const RunConfig& config, const std::filesystem::path& path);

}  // namespace meshwork
