// torchtitan's TOML job config (v0.1-0.2: `--job.config_file`): [parallelism] degrees
// (data_parallel_shard_degree -1 = the ranks the other axes leave), [training] local_batch_size
// (sequences per dp rank per micro-step), global_batch_size (-1: local x dp), seq_len, steps,
// [optimizer] lr, [lr_scheduler] warmup_steps, [activation_checkpoint] mode. torchtitan wraps
// pure replication in DDP, which "has not supported > 1D parallelism": dp_replicate > 1 with
// dp_shard = 1 cannot take tp (cp is fine: FSDP then shards over cp). Expert parallel is
// [parallelism] expert_parallel_degree, borrowed from dp_shard x cp x tp exactly as Meshwork's ep
// (core/mesh.h); expert_tensor_parallel_degree stays 1 (Meshwork plans no expert tp).
#include <map>
#include <sstream>

#include <toml++/toml.h>

#include "core/interop/format_common.h"
#include "core/model_spec.h"

namespace meshwork::interop::detail {

namespace {

// torchtitan's llama3 flavors of the bundled presets.
const std::map<std::string, std::string>& flavor_of_preset() {
  static const std::map<std::string, std::string> m = {
      {"llama-3.1-8b", "8B"}, {"llama-3.1-70b", "70B"}, {"llama-3.1-405b", "405B"},
      {"llama-3.2-1b", "1B"}, {"llama-3.2-3b", "3B"}, {"tiny", "debugmodel"}};
  return m;
}

Error toml_error(std::string_view name, const toml::node* node, std::string_view key, std::string_view value,
                 std::string_view allowed) {
  const int line = node ? static_cast<int>(node->source().begin.line) : 0;
  return Error{std::string(name) + (line > 0 ? ":" + std::to_string(line) : "") + ": " + std::string(key),
               std::string(value), std::string(allowed)};
}

std::string node_text(const toml::node* node) {
  if (!node) return "missing";
  std::ostringstream os;
  if (node->is_table()) os << "a table";
  else if (node->is_array()) os << "an array";
  else os << toml::node_view<const toml::node>(node);
  return os.str();
}

}  // namespace

Result<ExportedConfig> export_torchtitan(const ExportRequest& r) {
  const MeshShape& mesh = r.config.mesh;
  if (auto refusal = pure_replication_refusal(mesh, "torchtitan", /*cp_counts=*/false)) return *refusal;
  const TrainingConfig& t = r.config.training;
  ExportedConfig out;
  out.format = ConfigFormat::torchtitan;
  // Written by hand rather than through toml++'s printer: torchtitan's section order, and
  // numbers as people write them (lr = 3.0e-04, not 0.00029999999999999997).
  auto quoted = [](const std::string& text) { return nlohmann::json(text).dump(); };  // TOML basic string
  const std::string preset = r.config.model.is_string() ? r.config.model.get<std::string>() : std::string();
  auto spec = model_spec_from_run_model(r.config.model);
  if (spec && spec->architecture != "llama")
    out.notes.push_back("model: torchtitan's llama3 model stands in for " + spec->architecture + "; check [model]");
  // torchtitan 0.3 dropped TOML job configs for Python config functions; say so in the file.
  out.notes.push_back("for torchtitan <= 0.2.x (--job.config_file); 0.3 reads no TOML: give these values as "
                      "--section.key overrides after --module llama3 --config <a llama3 config>");
  std::string flavor = "8B";
  if (auto f = flavor_of_preset().find(preset); f != flavor_of_preset().end()) {
    flavor = f->second;
  } else {
    out.notes.push_back("[model] flavor: no torchtitan flavor matches " + (preset.empty() ? "the inline config" : preset) +
                        "; set flavor (or register one) to the planned architecture");
  }
  std::string y;
  y += "[job]\ndescription = " + quoted("Meshwork plan: " + mesh.to_string()) + "\n\n";
  y += "[model]\nname = \"llama3\"\nflavor = " + quoted(flavor) + "\n";
  if (auto hf = hf_weights_dir(r.config.model)) y += "hf_assets_path = " + quoted(hf->string()) + "\n";
  y += "\n[optimizer]\nname = \"AdamW\"\nlr = " + number_text(t.lr) + "\n\n";
  y += "[lr_scheduler]\nwarmup_steps = " + std::to_string(t.warmup_steps) + "\n\n";
  y += "[training]\nlocal_batch_size = " + std::to_string(t.micro_batch) + "\n";
  y += "global_batch_size = " + std::to_string(t.global_batch) + "\n";
  y += "seq_len = " + std::to_string(t.seq_len) + "\n";
  y += "steps = " + std::to_string(t.steps) + "\n";
  y += "max_norm = " + number_text(t.max_grad_norm) + "\n";
  y += std::string("mixed_precision_param = ") + (t.precision == Precision::bf16 ? "\"bfloat16\"" : "\"float32\"") + "\n\n";
  y += "[parallelism]\n";
  y += "data_parallel_replicate_degree = " + std::to_string(mesh[Axis::dp_replicate]) + "\n";
  y += "data_parallel_shard_degree = " + std::to_string(mesh[Axis::dp_shard]) + "\n";
  y += "context_parallel_degree = " + std::to_string(mesh[Axis::cp]) + "\n";
  y += "tensor_parallel_degree = " + std::to_string(mesh[Axis::tp]) + "\n";
  if (mesh.ep > 1 || (spec && spec->is_moe())) {
    y += "expert_parallel_degree = " + std::to_string(mesh.ep) + "\n";
    y += "expert_tensor_parallel_degree = 1\n";
  }
  y += "pipeline_parallel_degree = 1\n\n";
  y += std::string("[activation_checkpoint]\nmode = ") +
       (t.activation_checkpointing == ActivationCheckpointing::full ? "\"full\"" : "\"none\"") + "\n";
  for (int i = 0; i < r.num_machines; ++i)
    out.launch_commands.push_back(torchrun_line(r, i, "-m torchtitan.train --job.config_file " + launch_config_file(r, ConfigFormat::torchtitan)));
  out.text = export_header(r, out.notes) + y;
  return out;
}

Result<ImportedConfig> import_torchtitan(std::string_view text, std::string_view name) {
  toml::table doc;
  try {
    doc = toml::parse(text, std::string(name));
  } catch (const toml::parse_error& e) {
    return Error{std::string(name) + ":" + std::to_string(e.source().begin.line), "",
                 "not valid TOML (" + std::string(e.description()) + ")"};
  }
  ImportedConfig in;
  in.format = ConfigFormat::torchtitan;
  // An integer key of `section`, >= min (or exactly -1 where `rest` allows torchtitan's "the rest").
  auto integer = [&](const toml::table& section, const std::string& sname, const std::string& key, int min,
                     bool rest, std::optional<int>& target) -> Status {
    const toml::node* node = section.get(key);
    if (!node) return Status{};
    auto v = node->value_exact<int64_t>();
    if (!v || !((*v >= min && *v <= (int64_t{1} << 30)) || (rest && *v == -1)))
      return toml_error(name, node, sname + "." + key, node_text(node),
                        "a whole number >= " + std::to_string(min) + (rest ? " (or -1: the rest)" : ""));
    target = static_cast<int>(*v);
    return Status{};
  };
  static const std::map<std::string, std::vector<std::string>> used = {
      {"parallelism", {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                       "context_parallel_degree", "pipeline_parallel_degree", "expert_parallel_degree",
                       "expert_tensor_parallel_degree"}},
      {"training", {"local_batch_size", "global_batch_size", "seq_len", "steps", "mixed_precision_param", "dtype"}},
      {"optimizer", {"lr"}},
      {"lr_scheduler", {"warmup_steps"}},
      {"model", {"name", "flavor", "hf_assets_path"}},
      {"activation_checkpoint", {"mode"}}};
  for (const auto& [key, node] : doc) {
    const std::string section(key.str());
    auto it = used.find(section);
    const toml::table* t = node.as_table();
    if (it == used.end() || !t) {
      in.unknown_keys.push_back(section);
      continue;
    }
    for (const auto& [k, v] : *t) {
      (void)v;
      const std::string sub(k.str());
      if (std::find(it->second.begin(), it->second.end(), sub) == it->second.end())
        in.unknown_keys.push_back(section + "." + sub);
    }
  }
  if (const toml::table* p = doc["parallelism"].as_table()) {
    std::optional<int> rep, shard, tp, cp, pp, ep, etp;
    for (auto [key, target, rest] : {std::tuple{"data_parallel_replicate_degree", &rep, false},
                                     std::tuple{"data_parallel_shard_degree", &shard, true},
                                     std::tuple{"tensor_parallel_degree", &tp, false},
                                     std::tuple{"context_parallel_degree", &cp, false},
                                     std::tuple{"pipeline_parallel_degree", &pp, false},
                                     std::tuple{"expert_parallel_degree", &ep, false},
                                     std::tuple{"expert_tensor_parallel_degree", &etp, false}})
      if (Status s = integer(*p, "parallelism", key, 1, rest, *target); !s.ok()) return s.error();
    if (pp && *pp > 1)
      return toml_error(name, p->get("pipeline_parallel_degree"), "parallelism.pipeline_parallel_degree",
                        std::to_string(*pp), "1 (Meshwork does not plan pipeline parallelism yet)");
    MeshShape mesh;
    mesh[Axis::dp_replicate] = rep.value_or(1);
    mesh[Axis::dp_shard] = shard.value_or(-1);  // torchtitan's default: -1, the rest
    mesh[Axis::tp] = tp.value_or(1);
    mesh[Axis::cp] = cp.value_or(1);
    mesh.ep = ep.value_or(1);
    if (etp && *etp > 1)
      in.notes.push_back("expert_tensor_parallel_degree " + std::to_string(*etp) +
                         " planned as 1 (Meshwork plans whole experts per ep rank, as torchtitan now does)");
    in.mesh = mesh;
  }
  if (const toml::table* t = doc["training"].as_table()) {
    std::optional<int> global;
    for (auto [key, target, min, rest] : {std::tuple{"local_batch_size", &in.micro_batch, 1, false},
                                          std::tuple{"global_batch_size", &global, 1, true},
                                          std::tuple{"seq_len", &in.seq_len, 1, false},
                                          std::tuple{"steps", &in.steps, 1, false}})
      if (Status s = integer(*t, "training", key, min, rest, *target); !s.ok()) return s.error();
    if (global && *global > 0) in.global_batch = global;
    for (const char* key : {"mixed_precision_param", "dtype"}) {
      const toml::node* node = t->get(key);
      if (!node) continue;
      auto v = node->value_exact<std::string>();
      if (!v || (*v != "bfloat16" && *v != "float32"))
        return toml_error(name, node, std::string("training.") + key, node_text(node), "\"bfloat16\" or \"float32\"");
      if (*v == "bfloat16" || !in.precision) in.precision = *v == "bfloat16" ? Precision::bf16 : Precision::fp32;
    }
  }
  if (const toml::node* lr = doc["optimizer"]["lr"].node()) {
    auto v = lr->value<double>();
    if (!v || !(*v >= 0) || *v > 1e9) return toml_error(name, lr, "optimizer.lr", node_text(lr), "a number >= 0");
    in.lr = *v;
  }
  if (const toml::table* s = doc["lr_scheduler"].as_table())
    if (Status st = integer(*s, "lr_scheduler", "warmup_steps", 0, false, in.warmup_steps); !st.ok()) return st.error();
  if (const toml::node* mode = doc["activation_checkpoint"]["mode"].node()) {
    auto v = mode->value_exact<std::string>();
    if (!v || (*v != "none" && *v != "full" && *v != "selective"))
      return toml_error(name, mode, "activation_checkpoint.mode", node_text(mode), "\"none\", \"selective\" or \"full\"");
    in.activation_checkpointing = *v == "none" ? ActivationCheckpointing::none : ActivationCheckpointing::full;
    if (*v == "selective") in.notes.push_back("selective activation checkpointing planned as full (Meshwork plans none or full)");
  }
  if (const toml::table* m = doc["model"].as_table()) {
    const auto model_name = (*m)["name"].value<std::string>();
    const auto flavor = (*m)["flavor"].value<std::string>();
    const auto assets = (*m)["hf_assets_path"].value<std::string>();
    if (model_name == std::optional<std::string>("llama3") && flavor) {
      for (const auto& [preset, f] : flavor_of_preset())
        if (f == *flavor) in.model = preset;
    }
    if (!in.model && assets) in.model = *assets;
    if (!in.model && (model_name || flavor))
      in.notes.push_back("[model] " + model_name.value_or("?") + " " + flavor.value_or("?") +
                         ": no Meshwork preset matches; pick the model yourself");
  }
  return in;
}

}  // namespace meshwork::interop::detail
