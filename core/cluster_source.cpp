#include "core/cluster_source.h"

#include <algorithm>
#include <cmath>

namespace meshwork {

namespace {

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

Status read_string(const nlohmann::json& j, const std::string& field, const char* key, std::string& out) {
  if (!j.contains(key)) return {};
  const auto& v = j.at(key);
  if (!v.is_string()) return Error{field + "." + key, shown(v), "must be a string"};
  out = v.get<std::string>();
  return {};
}

Status read_count(const nlohmann::json& j, const std::string& field, const char* key, int min, int& out) {
  if (!j.contains(key)) return {};
  const auto& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > 1'000'000) {
    return Error{field + "." + key, shown(v), "a whole number from " + std::to_string(min) + " to 1000000"};
  }
  out = static_cast<int>(v.get<int64_t>());
  return {};
}

// A figure of a described cluster: a number > 0 (an unknown figure would plan nothing).
Status read_positive(const nlohmann::json& j, const std::string& field, const char* key, double& out) {
  if (!j.contains(key)) return Error{field + "." + key, "missing", "a number > 0"};
  const auto& v = j.at(key);
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    return Error{field + "." + key, shown(v), "a number > 0"};
  out = v.get<double>();
  return {};
}

Result<ClusterSource> described_from_json(const nlohmann::json& j, const std::string& field) {
  DescribedClusterSource d;
  for (Status st : {read_string(j, field, "name", d.name), read_string(j, field, "gpu", d.gpu),
                    read_count(j, field, "nodes", 1, d.nodes), read_count(j, field, "gpus_per_node", 1, d.gpus_per_node),
                    read_positive(j, field, "gpu_memory_bytes", d.gpu_memory_bytes),
                    read_positive(j, field, "peak_flops_bf16", d.peak_flops_bf16),
                    read_positive(j, field, "peak_flops_fp32", d.peak_flops_fp32),
                    read_positive(j, field, "intra_node_bytes_per_s", d.intra_node_bytes_per_s),
                    read_positive(j, field, "inter_node_bytes_per_s", d.inter_node_bytes_per_s)}) {
    if (!st) return st.error();
  }
  return ClusterSource(d);
}

}  // namespace

const char* cluster_source_kind(const ClusterSource& s) {
  return is_slurm(s) ? "slurm" : (is_described(s) ? "described" : "ssh");
}

std::string described_node_name(const DescribedClusterSource& s, int index) {
  return (s.name.empty() ? std::string("described") : s.name) + " node " + std::to_string(index);
}

nlohmann::json to_json(const ClusterSource& s) {
  if (const DescribedClusterSource* d = described_source(s))
    return {{"kind", "described"},
            {"name", d->name},
            {"nodes", d->nodes},
            {"gpus_per_node", d->gpus_per_node},
            {"gpu", d->gpu},
            {"gpu_memory_bytes", d->gpu_memory_bytes},
            {"peak_flops_bf16", d->peak_flops_bf16},
            {"peak_flops_fp32", d->peak_flops_fp32},
            {"intra_node_bytes_per_s", d->intra_node_bytes_per_s},
            {"inter_node_bytes_per_s", d->inter_node_bytes_per_s}};
  const SlurmPartitionSource* slurm = slurm_source(s);
  if (!slurm) return {{"kind", "ssh"}};
  nlohmann::json j = {{"kind", "slurm"},
                      {"login", slurm->login},
                      {"partition", slurm->partition},
                      {"nodes", slurm->nodes},
                      {"ranks_per_node", slurm->ranks_per_node},
                      {"gpus_per_node", slurm->gpus_per_node},
                      {"gpu_type", slurm->gpu_type}};
  if (slurm->gpu_memory_bytes > 0) j["gpu_memory_bytes"] = slurm->gpu_memory_bytes;
  return j;
}

Result<ClusterSource> cluster_source_from_json(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return Error{field, shown(j), "must be an object with \"kind\": \"ssh\" or \"slurm\""};
  if (!j.contains("kind") || !j.at("kind").is_string()) {
    return Error{field + ".kind", j.contains("kind") ? shown(j.at("kind")) : "", "must be \"ssh\" or \"slurm\""};
  }
  const std::string kind = j.at("kind").get<std::string>();
  if (kind == "ssh") return ClusterSource(SshNodesSource{});
  if (kind == "described") return described_from_json(j, field);
  if (kind != "slurm") return Error{field + ".kind", kind, "must be \"ssh\", \"slurm\" or \"described\""};
  SlurmPartitionSource s;
  for (Status st : {read_string(j, field, "login", s.login), read_string(j, field, "partition", s.partition),
                    read_string(j, field, "gpu_type", s.gpu_type), read_count(j, field, "nodes", 1, s.nodes),
                    read_count(j, field, "ranks_per_node", 1, s.ranks_per_node),
                    read_count(j, field, "gpus_per_node", 0, s.gpus_per_node)}) {
    if (!st) return st.error();
  }
  if (j.contains("gpu_memory_bytes")) {
    const auto& m = j.at("gpu_memory_bytes");
    if (!m.is_number() || m.get<double>() < 0) {
      return Error{field + ".gpu_memory_bytes", shown(m), "bytes per GPU, a number >= 0 (0: not known)"};
    }
    s.gpu_memory_bytes = m.get<double>();
  }
  return ClusterSource(s);
}

std::string slurm_node_name(const SlurmPartitionSource& s, int index) {
  return (s.partition.empty() ? std::string("default partition") : s.partition) + " node " + std::to_string(index);
}

ClusterSource stored_cluster_source(const nlohmann::json& config, const nlohmann::json& cluster_record) {
  if (config.is_object() && config.contains("cluster") && config["cluster"].is_object() &&
      config["cluster"].contains("source")) {
    if (auto s = cluster_source_from_json(config["cluster"]["source"])) return *s;
  }
  if (!cluster_record.is_object() || !cluster_record.contains("slurm") || !cluster_record["slurm"].is_object()) {
    return SshNodesSource{};
  }
  // Stored before the run config carried its source: the Slurm record says what was submitted.
  const nlohmann::json& slurm = cluster_record["slurm"];
  SlurmPartitionSource s;
  if (slurm.contains("login") && slurm["login"].is_string()) s.login = slurm["login"].get<std::string>();
  const nlohmann::json options = slurm.value("options", nlohmann::json::object());
  if (options.is_object()) {
    auto count = [&](const char* key, int min, int& out) {
      if (options.contains(key) && options[key].is_number_integer()) out = std::max(min, options[key].get<int>());
    };
    if (options.contains("partition") && options["partition"].is_string()) {
      s.partition = options["partition"].get<std::string>();
    }
    count("nodes", 1, s.nodes);
    count("nproc_per_node", 1, s.ranks_per_node);
    count("gpus_per_node", 0, s.gpus_per_node);
  }
  return s;
}

}  // namespace meshwork
