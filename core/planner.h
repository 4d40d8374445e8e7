// The shape planner: every mesh shape (pp, dp_replicate, dp_shard, cp, tp) for a cluster that
// validate_shape() accepts, with its per-rank memory and step-time estimates, ranked: shapes
// that fit device memory first, then by predicted tokens/s. `meshwork plan` and the workbench's
// Plan mode both call make_plan().
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/memory_estimate.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/run_config.h"
#include "core/time_estimate.h"
#include "core/parallel_layout.h"
#include "core/validation.h"

namespace meshwork {

struct PlanQuery {
  ModelSpec model;
  // The run's training settings, as a run config holds them; every shape is judged and
  // estimated with them. seq_len must be given; global_batch 0 plans micro_batch x dp for each
  // shape (no accumulation); with pp freed, pp_schedule and pp_virtual_stages judge the
  // pipelined shapes (core/pipeline_schedule.h). A bare query: bf16 on GPUs.
  TrainingConfig training{.seq_len = 0, .global_batch = 0, .precision = Precision::bf16, .device = DeviceKind::cuda};
  int nodes = 1;
  int gpus_per_node = 1;
  int64_t device_memory_bytes = 0;  // per rank (GPU memory, or a CPU rank's budget)
  // Axes the user fixed: a size >= 1 stays as given; 0 or -1 leaves the axis free. pp is fixed
  // at 1 unless the caller frees it (fixed.set(Axis::pp, 0)): pipelined shapes need a schedule
  // and micro-batches, which the caller then chooses.
  // ep (mixture of experts): fixed.ep >= 1 fixes it; 0 (the default) tries every degree that
  // divides both num_experts and the shape's dp_shard x cp x tp (only 1 for a dense model).
  MeshShape fixed = [] {
    MeshShape s{0, 0, 0, 0};
    s.ep = 0;
    return s;
  }();
  // How memory and time are estimated: the trainer's memory behaviour, the hardware (its links
  // are also the placement the slow-link rule judges), and, measured on the cluster, a
  // calibration (`meshwork calibrate`, core/calibration.h: replaces the hardware's constants
  // wherever it has a number; TimeEstimate says which) and a fit of its stored runs
  // (core/run_fit.h, made on the same base as the calibration).
  EstimateOptions estimate;
  TrainerSupport trainer;  // what the trainer runs (meshtrain by default; core/validation.h)
};

struct PlanEntry {
  MeshShape shape;
  bool fits = false;
  MemoryBreakdown memory;
  TimeEstimate time;
  std::vector<Diagnostic> warnings;
  std::string accelerate_refusal;  // non-empty: Accelerate would refuse this shape (why)
  // Mixture of experts with ep > 1: the routing imbalance its step time and its memory assume
  // (the measured routing's for this ep when the query has one, else MemoryModel::moe_imbalance).
  double step_imbalance = 1.0;
  double memory_imbalance = 1.0;
};

struct RejectedShape {
  MeshShape shape;
  std::vector<Diagnostic> errors;
};

struct Plan {
  int64_t world_size = 0;
  std::string model_name;
  int64_t model_params = 0;
  std::string routing_source;         // where the measured routing came from ("run 12"); empty: none
  std::vector<PlanEntry> shapes;      // valid shapes, best first
  std::vector<RejectedShape> rejected;  // shapes validation refused, in enumeration order
  bool any_fits() const;
};

// Every ordered factorization world = pp * dp_replicate * dp_shard * cp * tp with the fixed axes
// kept, in lexicographic order.
std::vector<MeshShape> enumerate_shapes(int64_t world_size, const MeshShape& fixed);

// The ep degrees the planner tries for `shape` (five axes resolved): `fixed_ep` alone when >= 1,
// else every degree dividing num_experts and dp_shard x cp x tp, ascending (1 for a dense model).
std::vector<int> expert_degrees(const MeshShape& shape, int fixed_ep, const ModelSpec& model);

// Why the first entry of a plan leads, in words (`meshwork plan` prints it under the table): its
// shape, whether it fits and with what room, its tokens/s against the runner-up and, for a
// mixture of experts, how its experts are split and where its all-to-all runs, against the best
// shape of the other kind (with or without ep). Empty for an empty plan.
std::string explain_first(const Plan& plan, int64_t device_memory_bytes);

// An Error for invalid input (a count < 1, fixed axes that do not divide the world size, a
// measured routing of another model) or when validation refuses every candidate shape (the
// first refusal's words).
Result<Plan> make_plan(const PlanQuery& query);

// The `meshwork plan --json` document:
// {"world_size", "model":{"name","params"}, "shapes":[{"dp_replicate","dp_shard","cp","tp",
//  "ep" (only when > 1), "fits", "memory_bytes":{"params","grads","optimizer","activations","buffers","reserve",
//  "total"}, "step_time_s","step_band" (TimeEstimate::step_band; 0: unknown),"compute_s","tokens_per_s","mfu","comm_s":{"dp_replicate","dp_shard","cp","tp"},
//  "calibrated":{"compute","dp_replicate","dp_shard","cp","tp"} (true: from the calibration),
//  "fitted":{"compute","dp_replicate","dp_shard","cp","tp"} (true: corrected by the fit of past runs),
//  "warnings":["field: value: message", ...], with ep > 1 also "ep", "efsdp" and
//  "routing_imbalance":{"step","memory"}}, ...], "routing": source (only with a measured routing)}
//  best first.
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace meshwork
