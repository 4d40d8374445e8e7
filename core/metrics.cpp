#include "core/metrics.h"

#include <algorithm>
#include <limits>

#include "core/mesh_json.h"

namespace meshwork {

namespace {

template <class T>
bool get_to(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else if constexpr (std::is_integral_v<T>) {
    // A number out of T's range (2e30 bytes, found by the fuzzer) would be undefined behaviour to
    // convert: such a field reads as absent, like any other value of the wrong kind.
    using Limits = std::numeric_limits<T>;
    if (it->is_number_unsigned()) {
      const uint64_t u = it->get<uint64_t>();
      if (u > static_cast<uint64_t>(Limits::max())) return false;
      out = static_cast<T>(u);
      return true;
    }
    if (it->is_number_integer()) {
      const int64_t v = it->get<int64_t>();
      if (v < static_cast<int64_t>(Limits::min()) || v > static_cast<int64_t>(Limits::max())) return false;
      out = static_cast<T>(v);
      return true;
    }
    if (!it->is_number_float()) return false;
    const double d = it->get<double>();
    if (!(d >= static_cast<double>(Limits::min()) && d < static_cast<double>(Limits::max()))) return false;
    out = static_cast<T>(d);
    return true;
  } else {
    if (!it->is_number()) return false;
  }
  out = it->get<T>();
  return true;
}

// The plain members of start and end records, as kStepScalars lists a step's ("rank" is
// required; the start record's mesh, config and versions are objects: read by hand).
constexpr std::tuple kStartScalars{
    Field{"time", &StartRecord::time},   Field{"host", &StartRecord::host},
    Field{"pid", &StartRecord::pid},     Field{"node", &StartRecord::node},
    Field{"world", &StartRecord::world}, Field{"peak_tflops", &StartRecord::peak_tflops}};
constexpr std::tuple kEvalScalars{Field{"time", &EvalRecord::time}, Field{"loss", &EvalRecord::loss},
                                  Field{"tokens", &EvalRecord::tokens}, Field{"eval_s", &EvalRecord::eval_s}};
constexpr std::tuple kEndScalars{Field{"time", &EndRecord::time}, Field{"status", &EndRecord::status},
                                 Field{"reason", &EndRecord::reason}};

// Visitors for the lists above: one sets j[name], the other reads an optional j[name].
auto write_to(nlohmann::json& j) {
  return [&j](const char* name, const auto& value) { j[name] = value; };
}
auto read_from(const nlohmann::json& j) {
  return [&j](const char* name, auto& value) { get_to(j, name, value); };
}

}  // namespace

// nlohmann::json keeps an object's keys sorted, so the order members are set in does not show.
std::string to_json_line(const StartRecord& r) {
  nlohmann::json j = {{"v", kMetricsVersion}, {"type", "start"},    {"rank", r.rank},
                      {"mesh", to_json(r.mesh)}, {"config", r.config}, {"versions", r.versions}};
  for_each_field(r, kStartScalars, write_to(j));
  return j.dump();
}

std::string to_json_line(const StepRecord& r) {
  nlohmann::json comm;
  for (Axis a : kAxes)  // pp only from a pipelined run: a line without stages reads as before
    if (a != Axis::pp || r.comm_s[a] != 0) comm[std::string(axis_name(a))] = r.comm_s[a];
  if (r.comm_ep_s != 0) comm[std::string(kEpName)] = r.comm_ep_s;
  nlohmann::json j = {
      {"v", kMetricsVersion}, {"type", "step"}, {"step", r.step}, {"rank", r.rank}, {"comm_s", comm}};
  for_each_field(r, kStepScalars, write_to(j));
  if (r.cpu_s) j["cpu_s"] = *r.cpu_s;
  if (r.moe) {
    nlohmann::json layers = nlohmann::json::array();
    for (const ExpertLoad& l : r.moe->layers)
      layers.push_back({{"layer", l.layer}, {"tokens", l.tokens}, {"min", l.min}, {"max", l.max},
                        {"imbalance", l.imbalance}});
    j["moe"] = {{"aux_loss", r.moe->aux_loss}, {"layers", layers}};
  }
  return j.dump();
}

ExpertLoad expert_load(int layer, std::vector<double> tokens) {
  ExpertLoad l;
  l.layer = layer;
  double sum = 0;
  for (size_t e = 0; e < tokens.size(); ++e) {
    l.min = e == 0 ? tokens[e] : std::min(l.min, tokens[e]);
    l.max = e == 0 ? tokens[e] : std::max(l.max, tokens[e]);
    sum += tokens[e];
  }
  l.imbalance = sum > 0 ? l.max / (sum / static_cast<double>(tokens.size())) : 0;
  l.tokens = std::move(tokens);
  return l;
}

std::string to_json_line(const EndRecord& r) {
  nlohmann::json j = {{"v", kMetricsVersion}, {"type", "end"}, {"rank", r.rank}};
  for_each_field(r, kEndScalars, write_to(j));
  return j.dump();
}

std::string to_json_line(const EvalRecord& r) {
  nlohmann::json j = {{"v", kMetricsVersion}, {"type", "eval"}, {"step", r.step}, {"rank", r.rank}};
  for_each_field(r, kEvalScalars, write_to(j));
  return j.dump();
}

std::string to_json_line(const CalibrationRecord& r) {
  nlohmann::json j = r.fields.is_object() ? r.fields : nlohmann::json::object();
  j["v"] = kMetricsVersion;
  j["type"] = "calibration";
  j["rank"] = r.rank;
  j["time"] = r.time;
  j["kind"] = r.kind;
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
    return Error{"metrics line", shown, "needs a \"type\" of start, step, eval or end"};
  if (type == "step") {
    StepRecord r;
    if (!get_to(j, "step", r.step) || !get_to(j, "rank", r.rank))
      return Error{"metrics line", shown, "a step record needs integer \"step\" and \"rank\""};
    for_each_field(r, kStepScalars, read_from(j));
    if (double cpu = 0; get_to(j, "cpu_s", cpu)) r.cpu_s = cpu;
    if (auto it = j.find("comm_s"); it != j.end() && it->is_object()) {
      for (Axis a : kAxes) get_to(*it, std::string(axis_name(a)).c_str(), r.comm_s[a]);
      get_to(*it, std::string(kEpName).c_str(), r.comm_ep_s);
    }
    // Mixtures of experts; a malformed "moe" is left out like any key a reader does not know.
    if (auto it = j.find("moe"); it != j.end() && it->is_object()) {
      MoeStepMetrics moe;
      get_to(*it, "aux_loss", moe.aux_loss);
      if (auto ls = it->find("layers"); ls != it->end() && ls->is_array())
        for (const auto& l : *ls) {
          int layer = 0;
          auto t = l.is_object() ? l.find("tokens") : l.end();
          if (!l.is_object() || !get_to(l, "layer", layer) || t == l.end() || !t->is_array()) continue;
          std::vector<double> tokens;
          for (const auto& v : *t)
            if (v.is_number()) tokens.push_back(v.get<double>());
          moe.layers.push_back(expert_load(layer, std::move(tokens)));
        }
      r.moe = std::move(moe);
    }
    return MetricsRecord{r};
  }
  if (type == "start") {
    StartRecord r;
    if (!get_to(j, "rank", r.rank)) return Error{"metrics line", shown, "a start record needs \"rank\""};
    for_each_field(r, kStartScalars, read_from(j));
    if (auto it = j.find("mesh"); it != j.end()) {
      auto mesh = mesh_shape_from_json(*it, "mesh", false);
      if (!mesh) return Error{"metrics line", shown, "start record: " + mesh.error().message()};
      r.mesh = *mesh;
    }
    if (auto it = j.find("config"); it != j.end()) r.config = *it;
    if (auto it = j.find("versions"); it != j.end()) r.versions = *it;
    return MetricsRecord{r};
  }
  if (type == "end") {
    EndRecord r;
    if (!get_to(j, "rank", r.rank)) return Error{"metrics line", shown, "an end record needs \"rank\""};
    for_each_field(r, kEndScalars, read_from(j));
    return MetricsRecord{r};
  }
  if (type == "eval") {
    EvalRecord r;
    if (!get_to(j, "step", r.step) || !get_to(j, "rank", r.rank) || !get_to(j, "loss", r.loss))
      return Error{"metrics line", shown, "an eval record needs integer \"step\" and \"rank\" and a \"loss\""};
    for_each_field(r, kEvalScalars, read_from(j));
    return MetricsRecord{r};
  }
  if (type == "calibration") {
    CalibrationRecord r;
    if (!get_to(j, "rank", r.rank) || !get_to(j, "kind", r.kind))
      return Error{"metrics line", shown, "a calibration record needs integer \"rank\" and a \"kind\""};
    get_to(j, "time", r.time);
    for (const char* k : {"v", "type", "rank", "time", "kind"}) j.erase(k);
    r.fields = std::move(j);
    return MetricsRecord{r};
  }
  return Error{"metrics line", shown,
               "unknown type \"" + type + "\"; allowed: start, step, eval, end, calibration"};
}

std::string comm_key(Axis axis) { return "comm_s." + std::string(axis_name(axis)); }

std::string comm_ep_key() { return "comm_s." + std::string(kEpName); }

const std::vector<std::string>& step_series_keys() {
  static const std::vector<std::string> keys = {
      "loss",     "lr",        "grad_norm",         "tokens",           "tokens_per_s",
      "tflops",   "mfu",       "mem_bytes",         "mem_peak_bytes",   "comm_s.dp_replicate",
      "comm_s.dp_shard", "comm_s.cp", "comm_s.tp", "compute_s",        "step_s",
      "comm_s.pp",  // v5, v6 and v7 appended theirs: the store's columns keep their index (schema.h)
      "comm_s.ep", "cpu_s"};
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
          {k[9], r.comm_s[Axis::dp_replicate]},
          {k[10], r.comm_s[Axis::dp_shard]},
          {k[11], r.comm_s[Axis::cp]},
          {k[12], r.comm_s[Axis::tp]},
          {k[13], r.compute_s},
          {k[14], r.step_s},
          {k[15], r.comm_s[Axis::pp]},
          {k[16], r.comm_ep_s},
          {k[17], r.cpu_s.value_or(std::numeric_limits<double>::quiet_NaN())}};
}

}  // namespace meshwork
