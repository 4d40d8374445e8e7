#include "core/metrics.h"

#include "core/mesh_json.h"

namespace meshwork {

namespace {

template <class T>
bool get_to(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else {
    if (!it->is_number()) return false;
  }
  out = it->get<T>();
  return true;
}

}  // namespace

std::string to_json_line(const StartRecord& r) {
  nlohmann::json j = {{"v", kMetricsVersion}, {"type", "start"},  {"rank", r.rank},
                      {"time", r.time},       {"host", r.host},    {"pid", r.pid},
                      {"node", r.node},       {"world", r.world},  {"mesh", to_json(r.mesh)},
                      {"config", r.config},   {"peak_tflops", r.peak_tflops},
                      {"versions", r.versions}};
  return j.dump();
}

std::string to_json_line(const StepRecord& r) {
  nlohmann::json comm;
  for (Axis a : kAxes) comm[std::string(axis_name(a))] = r.comm_s[static_cast<int>(a)];
  nlohmann::json j = {{"v", kMetricsVersion},
                      {"type", "step"},
                      {"step", r.step},
                      {"rank", r.rank},
                      {"time", r.time},
                      {"loss", r.loss},
                      {"lr", r.lr},
                      {"grad_norm", r.grad_norm},
                      {"tokens", r.tokens},
                      {"tokens_per_s", r.tokens_per_s},
                      {"tflops", r.tflops},
                      {"mfu", r.mfu},
                      {"mem_bytes", r.mem_bytes},
                      {"mem_peak_bytes", r.mem_peak_bytes},
                      {"comm_s", comm},
                      {"compute_s", r.compute_s},
                      {"step_s", r.step_s}};
  return j.dump();
}

std::string to_json_line(const EndRecord& r) {
  nlohmann::json j = {{"v", kMetricsVersion}, {"type", "end"},      {"rank", r.rank},
                      {"time", r.time},       {"status", r.status}, {"reason", r.reason}};
  return j.dump();
}

Result<MetricsRecord> parse_metrics_line(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const std::string shown(line.substr(0, 80));
  if (j.is_discarded() || !j.is_object()) return Error{"metrics line", shown, "is not a JSON object"};
  int v = 0;
  if (!get_to(j, "v", v) || v != kMetricsVersion)
    return Error{"metrics line", shown, "needs \"v\":1 (metrics format version 1)"};
  std::string type;
  if (!get_to(j, "type", type))
    return Error{"metrics line", shown, "needs a \"type\" of start, step or end"};
  if (type == "step") {
    StepRecord r;
    if (!get_to(j, "step", r.step) || !get_to(j, "rank", r.rank))
      return Error{"metrics line", shown, "a step record needs integer \"step\" and \"rank\""};
    get_to(j, "time", r.time);
    get_to(j, "loss", r.loss);
    get_to(j, "lr", r.lr);
    get_to(j, "grad_norm", r.grad_norm);
    get_to(j, "tokens", r.tokens);
    get_to(j, "tokens_per_s", r.tokens_per_s);
    get_to(j, "tflops", r.tflops);
    get_to(j, "mfu", r.mfu);
    get_to(j, "mem_bytes", r.mem_bytes);
    get_to(j, "mem_peak_bytes", r.mem_peak_bytes);
    get_to(j, "compute_s", r.compute_s);
    get_to(j, "step_s", r.step_s);
    if (auto it = j.find("comm_s"); it != j.end() && it->is_object())
      for (Axis a : kAxes) get_to(*it, std::string(axis_name(a)).c_str(), r.comm_s[int(a)]);
    return MetricsRecord{r};
  }
  if (type == "start") {
    StartRecord r;
    if (!get_to(j, "rank", r.rank)) return Error{"metrics line", shown, "a start record needs \"rank\""};
    get_to(j, "time", r.time);
    get_to(j, "host", r.host);
    get_to(j, "pid", r.pid);
    get_to(j, "node", r.node);
    get_to(j, "world", r.world);
    if (auto it = j.find("mesh"); it != j.end()) {
      auto mesh = mesh_shape_from_json(*it, "mesh", false);
      if (!mesh) return Error{"metrics line", shown, "start record: " + mesh.error().message()};
      r.mesh = *mesh;
    }
    if (auto it = j.find("config"); it != j.end()) r.config = *it;
    get_to(j, "peak_tflops", r.peak_tflops);
    if (auto it = j.find("versions"); it != j.end()) r.versions = *it;
    return MetricsRecord{r};
  }
  if (type == "end") {
    EndRecord r;
    if (!get_to(j, "rank", r.rank)) return Error{"metrics line", shown, "an end record needs \"rank\""};
    get_to(j, "time", r.time);
    get_to(j, "status", r.status);
    get_to(j, "reason", r.reason);
    return MetricsRecord{r};
  }
  return Error{"metrics line", shown, "unknown type \"" + type + "\"; allowed: start, step, end"};
}

std::string comm_key(Axis axis) { return "comm_s." + std::string(axis_name(axis)); }

const std::vector<std::string>& step_series_keys() {
  static const std::vector<std::string> keys = {
      "loss",     "lr",        "grad_norm",         "tokens",           "tokens_per_s",
      "tflops",   "mfu",       "mem_bytes",         "mem_peak_bytes",   "comm_s.dp_replicate",
      "comm_s.dp_shard", "comm_s.cp", "comm_s.tp", "compute_s",        "step_s"};
  return keys;
}

std::vector<std::pair<std::string, double>> step_series(const StepRecord& r) {
  const std::vector<std::string>& k = step_series_keys();
  return {{k[0], r.loss},
          {k[1], r.lr},
          {k[2], r.grad_norm},
          {k[3], static_cast<double>(r.tokens)},
          {k[4], r.tokens_per_s},
          {k[5], r.tflops},
          {k[6], r.mfu},
          {k[7], static_cast<double>(r.mem_bytes)},
          {k[8], static_cast<double>(r.mem_peak_bytes)},
          {k[9], r.comm_s[0]},
          {k[10], r.comm_s[1]},
          {k[11], r.comm_s[2]},
          {k[12], r.comm_s[3]},
          {k[13], r.compute_s},
          {k[14], r.step_s}};
}

}  // namespace meshwork
