// Expert parallelism's routing imbalance, measured: how much more than its share the busiest ep
// rank receives, for every ep degree, from the tokens per expert a run of the model stored.
//
// With ep ranks, rank b holds the contiguous block of experts [b E/ep, (b+1) E/ep) and computes
// every token copy routed to them. Let S_lb be the copies layer l routes to block b in a step
// and S_l = sum_b S_lb. Balanced routing gives each rank S_l / ep; the estimate scales that
// mean by an imbalance gamma >= 1 (core/memory_estimate.h, core/time_estimate.h):
//
//   step time: every sparse layer waits, in its all-to-all, for its own busiest rank, so a step
//     costs sum_l max_b S_lb where balanced routing costs sum_l S_l / ep:
//       gamma_step(ep)   = mean over steps of  sum_l max_b S_lb / (sum_l S_l / ep)
//   memory: a rank keeps every layer's routed activations until backward, and the peak is the
//     rank whose blocks received the most over all layers, in the worst step:
//       gamma_memory(ep) = max over steps of  max_b sum_l S_lb / (sum_l S_l / ep)
//
// gamma_memory <= gamma_step's per-step value (one rank across layers against each layer's
// own busiest). Routing is a property of the model and its data, not of the mesh (meshtrain's
// routing is the same at every shape: tests/trainer's parity), so one run at any shape, ep 1
// included, measures gamma for every ep. The counts are of the whole global batch (docs/metrics.md,
// "moe"); a micro-batch's own imbalance can only be larger, so gamma is a lower bound there.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/model_spec.h"

namespace meshwork {

// One step's routing: per sparse layer (ascending), the token copies each expert received.
struct RoutedStep {
  std::vector<std::vector<double>> layers;
};

class MeasuredRouting {
 public:
  // An Error for no steps, a step without layers, layers of differing expert counts or
  // counts that are negative or not finite. `source` says where it was measured ("run 12").
  static Result<MeasuredRouting> make(std::vector<RoutedStep> steps, std::string source);

  int num_experts() const { return num_experts_; }
  int sparse_layers() const { return sparse_layers_; }
  int64_t steps() const { return static_cast<int64_t>(steps_.size()); }
  const std::string& source() const { return source_; }

  // gamma_step(ep) and gamma_memory(ep) above; 1 for ep <= 1 or an ep that does not divide
  // num_experts (no such mesh is valid), and 1 for steps that routed nothing.
  double step_imbalance(int ep) const;
  double memory_imbalance(int ep) const;

  // An Error naming the field when the measurement cannot be of `model`: a dense model, another
  // number of experts or of sparse layers.
  Status check_matches(const ModelSpec& model) const;

 private:
  std::vector<RoutedStep> steps_;
  std::string source_;
  int num_experts_ = 0;
  int sparse_layers_ = 0;
};

}  // namespace meshwork
