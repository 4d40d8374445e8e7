#include "core/interop/foreign_metrics.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <nlohmann/json.hpp>

namespace meshwork::interop {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}
}  // namespace

MetricName meshwork_metric_name(std::string_view tool_name) {
  // Lower-cased names, as the trackers write them (Trainer: "train/loss" through its
  // TensorBoard callback, "loss" in trainer_state; torchtitan: "loss_metrics/global_avg_loss",
  // "tps", "mfu(%)", "memory/max_active(GiB)"; Accelerate: whatever the script logs).
  static const std::map<std::string, MetricName> known = {
      {"loss", {"loss", 1, true}},
      {"train/loss", {"loss", 1, true}},
      {"loss/train", {"loss", 1, true}},
      {"loss_metrics/global_avg_loss", {"loss", 1, true}},
      {"lr", {"lr", 1, true}},
      {"learning_rate", {"lr", 1, true}},
      {"train/learning_rate", {"lr", 1, true}},
      {"grad_norm", {"grad_norm", 1, true}},
      {"train/grad_norm", {"grad_norm", 1, true}},
      {"tps", {"tokens_per_s", 1, true}},
      {"throughput", {"tokens_per_s", 1, true}},
      {"tokens_per_s", {"tokens_per_s", 1, true}},
      {"tokens_per_second", {"tokens_per_s", 1, true}},
      {"tflops", {"tflops", 1, true}},
      {"mfu(%)", {"mfu", 0.01, true}},
      {"mfu", {"mfu", 1, true}},
      {"memory/max_active(gib)", {"mem_peak_bytes", 1073741824.0, true}},
      {"eval/loss", {"eval_loss", 1, true}},
      {"eval_loss", {"eval_loss", 1, true}},
      {"validation/loss", {"eval_loss", 1, true}},
  };
  if (auto it = known.find(lower(tool_name)); it != known.end()) return it->second;
  return MetricName{std::string(tool_name), 1, false};
}

Result<std::vector<ScalarPoint>> read_trainer_state(std::string_view text, std::string_view name) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return Error{std::string(name), "", "not a JSON object (Hugging Face Trainer's trainer_state.json was expected)"};
  auto history = doc.find("log_history");
  if (history == doc.end() || !history->is_array())
    return Error{std::string(name) + ": log_history", "", "a list of logged records was expected"};
  std::vector<ScalarPoint> points;
  for (size_t i = 0; i < history->size(); ++i) {
    const nlohmann::json& entry = (*history)[i];
    if (!entry.is_object())
      return Error{std::string(name) + ": log_history[" + std::to_string(i) + "]", entry.dump().substr(0, 40),
                   "an object of logged values"};
    auto step = entry.find("step");
    if (step == entry.end()) continue;
    if (!step->is_number_integer() || step->get<int64_t>() < 0)
      return Error{std::string(name) + ": log_history[" + std::to_string(i) + "].step", step->dump(),
                   "a whole number >= 0"};
    for (const auto& [key, value] : entry.items()) {
      // A value logged under no name ("": 0.5) belongs to no series: it is skipped, as text is.
      if (key == "step" || key.empty() || !value.is_number()) continue;
      points.push_back({step->get<int64_t>(), 0.0, key, value.get<double>()});
    }
  }
  return points;
}

}  // namespace meshwork::interop
