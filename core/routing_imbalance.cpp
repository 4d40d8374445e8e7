#include "core/routing_imbalance.h"

#include <algorithm>
#include <cmath>

namespace meshwork {

namespace {

// S_lb for every layer of one step: layer l's copies summed over each of ep contiguous blocks.
std::vector<std::vector<double>> block_sums(const RoutedStep& step, int ep) {
  std::vector<std::vector<double>> out;
  out.reserve(step.layers.size());
  for (const std::vector<double>& tokens : step.layers) {
    const size_t per_block = tokens.size() / static_cast<size_t>(ep);
    std::vector<double> blocks(static_cast<size_t>(ep), 0.0);
    for (size_t e = 0; e < tokens.size(); ++e) blocks[e / per_block] += tokens[e];
    out.push_back(std::move(blocks));
  }
  return out;
}

bool splits(int num_experts, int ep) { return ep > 1 && num_experts > 0 && num_experts % ep == 0; }

}  // namespace

Result<MeasuredRouting> MeasuredRouting::make(std::vector<RoutedStep> steps, std::string source) {
  if (steps.empty()) return Error{"routing", source, "a run that stored its tokens per expert (an MoE run's steps)"};
  MeasuredRouting r;
  r.num_experts_ = steps.front().layers.empty() ? 0 : static_cast<int>(steps.front().layers.front().size());
  r.sparse_layers_ = static_cast<int>(steps.front().layers.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    const RoutedStep& step = steps[s];
    const std::string where = source + ", step " + std::to_string(s);
    if (step.layers.empty() || static_cast<int>(step.layers.size()) != r.sparse_layers_)
      return Error{"routing.layers", where + ": " + std::to_string(step.layers.size()) + " layers",
                   "every step with the same sparse layers (" + std::to_string(r.sparse_layers_) + ")"};
    for (const std::vector<double>& tokens : step.layers) {
      if (static_cast<int>(tokens.size()) != r.num_experts_ || r.num_experts_ == 0)
        return Error{"routing.experts", where + ": " + std::to_string(tokens.size()) + " experts",
                     "every layer with the same number of experts (" + std::to_string(r.num_experts_) + ")"};
      for (double t : tokens)
        if (!std::isfinite(t) || t < 0)
          return Error{"routing.tokens", where + ": " + std::to_string(t), "a finite count >= 0"};
    }
  }
  r.steps_ = std::move(steps);
  r.source_ = std::move(source);
  return r;
}

double MeasuredRouting::step_imbalance(int ep) const {
  if (!splits(num_experts_, ep)) return 1.0;
  double sum = 0;
  int64_t counted = 0;
  for (const RoutedStep& step : steps_) {
    double busiest = 0, total = 0;
    for (const std::vector<double>& blocks : block_sums(step, ep)) {
      busiest += *std::max_element(blocks.begin(), blocks.end());
      for (double b : blocks) total += b;
    }
    if (total <= 0) continue;
    sum += busiest / (total / ep);
    ++counted;
  }
  return counted > 0 ? std::max(1.0, sum / static_cast<double>(counted)) : 1.0;
}

double MeasuredRouting::memory_imbalance(int ep) const {
  if (!splits(num_experts_, ep)) return 1.0;
  double worst = 1.0;
  for (const RoutedStep& step : steps_) {
    std::vector<double> per_rank(static_cast<size_t>(ep), 0.0);
    double total = 0;
    for (const std::vector<double>& blocks : block_sums(step, ep))
      for (size_t b = 0; b < blocks.size(); ++b) {
        per_rank[b] += blocks[b];
        total += blocks[b];
      }
    if (total <= 0) continue;
    worst = std::max(worst, *std::max_element(per_rank.begin(), per_rank.end()) / (total / ep));
  }
  return worst;
}

Status MeasuredRouting::check_matches(const ModelSpec& model) const {
  if (!model.is_moe())
    return Error{"routing", source_, "the routing of a mixture of experts; " + model.name + " is dense"};
  if (model.moe.num_experts != num_experts_)
    return Error{"routing", source_ + ": " + std::to_string(num_experts_) + " experts",
                 "a run of a model with " + std::to_string(model.moe.num_experts) + " experts, as " + model.name + " has"};
  if (model.sparse_layer_count() != sparse_layers_)
    return Error{"routing", source_ + ": " + std::to_string(sparse_layers_) + " sparse layers",
                 "a run of a model with " + std::to_string(model.sparse_layer_count()) + " sparse layers, as " +
                     model.name + " has"};
  return Status::Ok();
}

}  // namespace meshwork
