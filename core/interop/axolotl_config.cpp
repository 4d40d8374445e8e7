// Axolotl's YAML config: the ND-parallel sizes are top-level keys (dp_shard_size,
// dp_replicate_size, context_parallel_size, tensor_parallel_size), FSDP2 is `fsdp_version: 2`
// with `fsdp_config` keys without the `fsdp_` prefix, and the batch is given per rank
// (micro_batch_size) with gradient_accumulation_steps: global = micro x accumulation x dp.
// Axolotl builds Accelerate's ParallelismConfig from the sizes, so Accelerate's rules apply.
// Expert parallel is its plugin's (axolotl.integrations.expert_parallel) expert_parallel_size, an
// axis of its own: ep x dp_shard_size x tensor_parallel_size x context_parallel_size = world, no
// dp_replicate, no tp with ep. Meshwork's ep borrows from dp_shard (x cp x tp), so its dp_shard S
// with ep E is Axolotl's dp_shard_size S / E beside expert_parallel_size E, and back.
#include <algorithm>

#include "core/interop/format_common.h"

namespace meshwork::interop::detail {

Result<ExportedConfig> export_axolotl(const ExportRequest& r) {
  const MeshShape& mesh = r.config.mesh;
  if (auto refusal = pure_replication_refusal(mesh, "Axolotl (through Accelerate)")) return *refusal;
  const int ep = mesh.ep;
  if (ep > 1) {
    const std::string value = std::to_string(ep);
    if (mesh[Axis::tp] > 1)
      return Error{std::string(kEpName), value,
                   "1 for Axolotl with tp " + std::to_string(mesh[Axis::tp]) +
                       ": its expert-parallel plugin refuses ep x tp; plan tp 1 (or --ep 1) for Axolotl, or export "
                       "torchtitan"};
    if (mesh[Axis::dp_replicate] > 1)
      return Error{std::string(kEpName), value,
                   "1 for Axolotl with dp_replicate " + std::to_string(mesh[Axis::dp_replicate]) +
                       ": its expert-parallel plugin needs ep x dp_shard x cp x tp = world (no replication); plan "
                       "dp_replicate 1 for Axolotl, or export torchtitan"};
    if (mesh[Axis::dp_shard] % ep != 0)
      return Error{std::string(kEpName), value,
                   "a divisor of dp_shard (" + std::to_string(mesh[Axis::dp_shard]) +
                       ") for Axolotl: its ep is an axis of its own beside dp_shard_size, so Meshwork's ep must come "
                       "out of dp_shard alone; export torchtitan for ep over cp"};
  }
  int accumulation = 1;
  INTEROP_TRY(accumulation, grad_accum_steps(r.config));
  const TrainingConfig& t = r.config.training;
  ExportedConfig out;
  out.format = ConfigFormat::axolotl;
  std::string y;
  if (auto model = hugging_face_model(r.config.model)) {
    y += "base_model: " + yaml_quote(*model) + "\n";
  } else {
    out.notes.push_back("base_model: the planned model has no public checkpoint; add base_model yourself");
  }
  out.notes.push_back("a fragment: add datasets, output_dir and the rest of your Axolotl config");
  y += "sequence_len: " + std::to_string(t.seq_len) + "\n";
  y += "micro_batch_size: " + std::to_string(t.micro_batch) + "\n";
  y += "gradient_accumulation_steps: " + std::to_string(accumulation) + "\n";
  y += "learning_rate: " + number_text(t.lr) + "\n";
  y += "warmup_steps: " + std::to_string(t.warmup_steps) + "\n";
  y += "max_steps: " + std::to_string(t.steps) + "\n";
  y += std::string("bf16: ") + (t.precision == Precision::bf16 ? "true" : "false") + "\n";
  y += std::string("gradient_checkpointing: ") +
       (t.activation_checkpointing == ActivationCheckpointing::full ? "true" : "false") + "\n";
  y += "dp_shard_size: " + std::to_string(mesh[Axis::dp_shard] / std::max(1, ep)) + "\n";
  y += "dp_replicate_size: " + std::to_string(mesh[Axis::dp_replicate]) + "\n";
  y += "context_parallel_size: " + std::to_string(mesh[Axis::cp]) + "\n";
  y += "tensor_parallel_size: " + std::to_string(mesh[Axis::tp]) + "\n";
  if (ep > 1) {
    y += "plugins:\n  - axolotl.integrations.expert_parallel.ExpertParallelPlugin\n";
    y += "expert_parallel_size: " + std::to_string(ep) + "\n";
    out.notes.push_back("expert_parallel_size: Axolotl's plugin dispatches with DeepEP (NVLink within a node); "
                        "check that it supports this model's experts");
  }
  if (mesh[Axis::dp_shard] > 1 || mesh[Axis::cp] > 1) {
    y += "fsdp_version: 2\n";
    y += "fsdp_config:\n";
    y += "  offload_params: false\n";
    y += "  state_dict_type: SHARDED_STATE_DICT\n";
    y += "  auto_wrap_policy: TRANSFORMER_BASED_WRAP\n";
    y += "  transformer_layer_cls_to_wrap: " + decoder_layer_class(r.config.model) + "\n";
    y += "  reshard_after_forward: true\n";
  }
  for (int i = 0; i < r.num_machines; ++i) out.launch_commands.push_back(torchrun_line(r, i, "-m axolotl.cli.train " + launch_config_file(r, ConfigFormat::axolotl)));
  out.text = export_header(r, out.notes) + y;
  return out;
}

Result<ImportedConfig> import_axolotl(const YAML::Node& root, std::string_view name) {
  ImportedConfig in;
  in.format = ConfigFormat::axolotl;
  MeshShape mesh;
  bool any_size = false, fsdp = false;
  int expert_parallel = 1;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    auto axis_key = [&](Axis a) -> Status {
      int size = 1;
      INTEROP_TRY(size, yaml_int(v, name, key));
      mesh[a] = size;
      any_size = true;
      return Status{};
    };
    if (key == "base_model") {
      std::string model;
      INTEROP_TRY(model, yaml_string(v, name, key));
      in.model = preset_for_model(model);
    } else if (key == "sequence_len") {
      INTEROP_TRY(in.seq_len, yaml_int(v, name, key));
    } else if (key == "micro_batch_size") {
      INTEROP_TRY(in.micro_batch, yaml_int(v, name, key));
    } else if (key == "gradient_accumulation_steps") {
      INTEROP_TRY(in.grad_accum_steps, yaml_int(v, name, key));
    } else if (key == "learning_rate") {
      INTEROP_TRY(in.lr, yaml_double(v, name, key));
    } else if (key == "warmup_steps") {
      INTEROP_TRY(in.warmup_steps, yaml_int(v, name, key, 0));
    } else if (key == "max_steps") {
      INTEROP_TRY(in.steps, yaml_int(v, name, key));
    } else if (key == "bf16") {
      // Axolotl also takes "auto" (bf16 where the GPU has it): plan bf16.
      if (v.IsScalar() && v.Scalar() == "auto") {
        in.precision = Precision::bf16;
      } else {
        bool bf16 = false;
        INTEROP_TRY(bf16, yaml_bool(v, name, key));
        if (bf16 || !in.precision) in.precision = bf16 ? Precision::bf16 : Precision::fp32;
      }
    } else if (key == "fp16") {
      bool fp16 = false;
      INTEROP_TRY(fp16, yaml_bool(v, name, key));
      if (fp16) {
        in.precision = Precision::bf16;
        in.notes.push_back("fp16 planned as bf16 (Meshwork plans fp32 or bf16)");
      }
    } else if (key == "gradient_checkpointing") {
      bool ac = false;
      INTEROP_TRY(ac, yaml_bool(v, name, key));
      in.activation_checkpointing = ac ? ActivationCheckpointing::full : ActivationCheckpointing::none;
    } else if (key == "dp_shard_size") {
      if (Status s = axis_key(Axis::dp_shard); !s.ok()) return s.error();
    } else if (key == "dp_replicate_size") {
      if (Status s = axis_key(Axis::dp_replicate); !s.ok()) return s.error();
    } else if (key == "context_parallel_size") {
      if (Status s = axis_key(Axis::cp); !s.ok()) return s.error();
    } else if (key == "tensor_parallel_size") {
      if (Status s = axis_key(Axis::tp); !s.ok()) return s.error();
    } else if (key == "expert_parallel_size") {
      INTEROP_TRY(expert_parallel, yaml_int(v, name, key));
      any_size = true;
    } else if (key == "plugins") {
      // Plugins do not change the plan; the expert-parallel one is read through its size above.
    } else if (key == "fsdp_version") {
      int version = 0;
      INTEROP_TRY(version, yaml_int(v, name, key));
      if (version != 2) in.notes.push_back("fsdp_version " + std::to_string(version) + ": meshtrain shards as FSDP2 does");
      fsdp = true;
    } else if (key == "fsdp_config") {
      fsdp = true;
    } else {
      in.unknown_keys.push_back(key);
    }
  }
  if (any_size || fsdp) {
    // Axolotl gives dp_shard the processes the other axes leave when it is not set.
    if (fsdp && !root["dp_shard_size"]) mesh[Axis::dp_shard] = -1;
    // Axolotl's ep is an axis of its own; Meshwork's borrows from dp_shard (see the top).
    if (expert_parallel > 1) {
      mesh.ep = expert_parallel;
      if (mesh[Axis::dp_shard] >= 1) mesh[Axis::dp_shard] *= expert_parallel;
    }
    in.mesh = mesh;
  }
  return in;
}

}  // namespace meshwork::interop::detail
