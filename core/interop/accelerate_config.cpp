// Accelerate's config file (what `accelerate config` writes and `accelerate launch --config_file`
// reads): ND parallelism lives in `parallelism_config` (keys prefixed `parallelism_config_`),
// FSDP2 in `fsdp_config` (keys prefixed `fsdp_`). num_processes counts every process of every
// machine. Accelerate builds its DeviceMesh in Meshwork's axis order (dp_replicate, dp_shard,
// cp, tp), so the sizes map one to one.
#include <set>

#include "core/interop/format_common.h"
#include "core/shell_quote.h"

namespace meshwork::interop::detail {

namespace {

std::string accelerate_launch_line(const ExportRequest& r, int machine_rank) {
  return "accelerate launch --config_file " + launch_config_file(r, ConfigFormat::accelerate) +
         " --machine_rank " + std::to_string(machine_rank) +
         " --main_process_ip " + shell_quote(r.main_address) + " --main_process_port " + std::to_string(r.main_port) + " " +
         r.script;
}

}  // namespace

Result<ExportedConfig> export_accelerate(const ExportRequest& r) {
  const MeshShape& mesh = r.config.mesh;
  // Accelerate's ParallelismConfig has no expert-parallel size (the change that added ep_size was
  // closed unmerged): a file without it would train every expert on every rank, not the plan.
  if (mesh.ep > 1)
    return Error{std::string(kEpName), std::to_string(mesh.ep),
                 "1 for Accelerate: its ParallelismConfig has no expert parallel, so this plan cannot be written for "
                 "it; export torchtitan (expert_parallel_degree) or Axolotl (its expert-parallel plugin), or plan with "
                 "--ep 1"};
  if (auto refusal = pure_replication_refusal(mesh, "Accelerate")) return *refusal;
  const TrainingConfig& t = r.config.training;
  ExportedConfig out;
  out.format = ConfigFormat::accelerate;
  // FSDP2 needs a dimension to shard over (dp_shard or cp); with neither, Accelerate's own check
  // ("FSDP is enabled but the parallelism config has no dimension for FSDP to shard across")
  // fails, so pure replication (with or without tp) is plain multi-device data parallelism.
  const bool fsdp = mesh[Axis::dp_shard] > 1 || mesh[Axis::cp] > 1;
  const bool cpu = t.device == DeviceKind::cpu;
  out.notes.push_back("set in your training script: seq_len " + std::to_string(t.seq_len) + ", micro-batch " +
                      std::to_string(t.micro_batch) + ", global batch " + std::to_string(t.global_batch) +
                      ", lr " + number_text(t.lr) + ", warmup " + std::to_string(t.warmup_steps) + ", steps " +
                      std::to_string(t.steps) + " (Accelerate's config has no keys for them)");
  const int world = r.num_machines * r.processes_per_machine;
  std::string y;
  y += "compute_environment: LOCAL_MACHINE\n";
  y += "debug: false\n";
  y += std::string("distributed_type: ") + (fsdp ? "FSDP" : (cpu ? "MULTI_CPU" : "MULTI_GPU")) + "\n";
  y += "downcast_bf16: 'no'\n";
  y += "enable_cpu_affinity: false\n";
  if (fsdp) {
    y += "fsdp_config:\n";
    y += std::string("  fsdp_activation_checkpointing: ") +
         (t.activation_checkpointing == ActivationCheckpointing::full ? "true" : "false") + "\n";
    y += "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n";
    y += "  fsdp_cpu_ram_efficient_loading: true\n";
    y += "  fsdp_offload_params: false\n";
    y += "  fsdp_reshard_after_forward: true\n";
    y += "  fsdp_state_dict_type: SHARDED_STATE_DICT\n";
    y += "  fsdp_transformer_layer_cls_to_wrap: " + decoder_layer_class(r.config.model) + "\n";
    y += "  fsdp_version: 2\n";
  } else if (t.activation_checkpointing == ActivationCheckpointing::full) {
    out.notes.push_back("activation checkpointing: enable it in your script (model.gradient_checkpointing_enable()); "
                        "without FSDP Accelerate's config has no key for it");
  }
  y += "machine_rank: 0\n";
  y += "main_process_ip: " + yaml_scalar(r.main_address) + "\n";
  y += "main_process_port: " + std::to_string(r.main_port) + "\n";
  y += "main_training_function: main\n";
  y += std::string("mixed_precision: ") + (t.precision == Precision::bf16 ? "bf16" : "'no'") + "\n";
  y += "num_machines: " + std::to_string(r.num_machines) + "\n";
  y += "num_processes: " + std::to_string(world) + "\n";
  y += "parallelism_config:\n";
  y += "  parallelism_config_dp_replicate_size: " + std::to_string(mesh[Axis::dp_replicate]) + "\n";
  y += "  parallelism_config_dp_shard_size: " + std::to_string(mesh[Axis::dp_shard]) + "\n";
  y += "  parallelism_config_tp_size: " + std::to_string(mesh[Axis::tp]) + "\n";
  y += "  parallelism_config_cp_size: " + std::to_string(mesh[Axis::cp]) + "\n";
  y += "rdzv_backend: static\n";
  y += "same_network: true\n";
  y += "tpu_env: []\n";
  y += "tpu_use_cluster: false\n";
  y += "tpu_use_sudo: false\n";
  y += std::string("use_cpu: ") + (cpu ? "true" : "false") + "\n";
  for (int i = 0; i < r.num_machines; ++i) out.launch_commands.push_back(accelerate_launch_line(r, i));
  out.text = export_header(r, out.notes) + y;
  return out;
}

Result<ImportedConfig> import_accelerate(const YAML::Node& root, std::string_view name) {
  ImportedConfig in;
  in.format = ConfigFormat::accelerate;
  // Keys that configure Accelerate itself and change nothing Meshwork plans.
  static const std::set<std::string> ignored = {
      "compute_environment", "debug", "downcast_bf16", "enable_cpu_affinity", "machine_rank",
      "main_process_ip", "main_process_port", "main_training_function", "rdzv_backend", "same_network",
      "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "gpu_ids", "dynamo_config", "num_cpu_threads_per_process"};
  static const std::set<std::string> ignored_fsdp = {
      "fsdp_auto_wrap_policy", "fsdp_cpu_ram_efficient_loading", "fsdp_offload_params",
      "fsdp_reshard_after_forward", "fsdp_state_dict_type", "fsdp_transformer_layer_cls_to_wrap",
      "fsdp_sync_module_states", "fsdp_use_orig_params", "fsdp_backward_prefetch", "fsdp_forward_prefetch",
      "fsdp_min_num_params", "fsdp_sharding_strategy"};
  static const std::set<std::string> ignored_parallelism = {
      "parallelism_config_cp_backend", "parallelism_config_cp_comm_strategy", "parallelism_config_sp_backend",
      "parallelism_config_sp_seq_length"};
  std::string distributed_type;
  std::optional<MeshShape> mesh;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key == "distributed_type") {
      INTEROP_TRY(distributed_type, yaml_string(v, name, key));
    } else if (key == "mixed_precision") {
      std::string p;
      INTEROP_TRY(p, yaml_string(v, name, key));
      if (p == "no") {
        in.precision = Precision::fp32;
      } else if (p == "bf16") {
        in.precision = Precision::bf16;
      } else if (p == "fp16" || p == "fp8") {
        in.precision = Precision::bf16;
        in.notes.push_back("mixed_precision " + p + " planned as bf16 (Meshwork plans fp32 or bf16)");
      } else {
        return yaml_error(name, v, key, p, "no, bf16, fp16 or fp8");
      }
    } else if (key == "num_machines") {
      INTEROP_TRY(in.num_machines, yaml_int(v, name, key));
    } else if (key == "num_processes") {
      INTEROP_TRY(in.num_processes, yaml_int(v, name, key));
    } else if (key == "use_cpu") {
      bool cpu = false;
      INTEROP_TRY(cpu, yaml_bool(v, name, key));
      if (cpu) in.device = DeviceKind::cpu;
    } else if (key == "fsdp_config" && v.IsMap()) {
      for (const auto& f : v) {
        const std::string fkey = f.first.Scalar();
        if (fkey == "fsdp_activation_checkpointing") {
          bool ac = false;
          INTEROP_TRY(ac, yaml_bool(f.second, name, "fsdp_config." + fkey));
          in.activation_checkpointing = ac ? ActivationCheckpointing::full : ActivationCheckpointing::none;
        } else if (fkey == "fsdp_version") {
          int version = 0;
          INTEROP_TRY(version, yaml_int(f.second, name, "fsdp_config." + fkey));
          if (version != 2) in.notes.push_back("fsdp_version " + std::to_string(version) + ": meshtrain shards as FSDP2 does");
        } else if (!ignored_fsdp.count(fkey)) {
          in.unknown_keys.push_back("fsdp_config." + fkey);
        }
      }
    } else if (key == "parallelism_config" && v.IsMap()) {
      mesh = MeshShape{};
      for (const auto& p : v) {
        const std::string pkey = p.first.Scalar();
        const std::string dotted = "parallelism_config." + pkey;
        const std::string prefix = "parallelism_config_";
        std::string axis = pkey.rfind(prefix, 0) == 0 ? pkey.substr(prefix.size()) : pkey;
        if (axis.size() > 5 && axis.compare(axis.size() - 5, 5, "_size") == 0) axis.resize(axis.size() - 5);
        if (auto a = axis_from_name(axis)) {
          INTEROP_TRY((*mesh)[*a], yaml_int(p.second, name, dotted));
        } else if (axis == "sp") {
          int sp = 1;
          INTEROP_TRY(sp, yaml_int(p.second, name, dotted));
          if (sp > 1) return yaml_error(name, p.second, dotted, std::to_string(sp), "1 (DeepSpeed sequence parallelism is not planned by Meshwork; use cp)");
        } else if (!ignored_parallelism.count(pkey)) {
          in.unknown_keys.push_back(dotted);
        }
      }
    } else if (!ignored.count(key)) {
      in.unknown_keys.push_back(key);
    }
  }
  if (distributed_type == "MULTI_CPU") in.device = DeviceKind::cpu;
  if (!mesh && in.num_processes) {
    // No parallelism_config: FSDP shards over every process, the multi-device types replicate.
    mesh = MeshShape{};
    (*mesh)[distributed_type == "FSDP" ? Axis::dp_shard : Axis::dp_replicate] = *in.num_processes;
  }
  if (mesh && in.num_processes && mesh->world_size() != *in.num_processes)
    return Error{std::string(name) + ": parallelism_config", mesh->to_string(),
                 "the product of the sizes must equal num_processes (" + std::to_string(*in.num_processes) + ")"};
  in.mesh = mesh;
  return in;
}

}  // namespace meshwork::interop::detail
