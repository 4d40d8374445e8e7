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
  int nodes = 1;
  int gpus_per_node = 1;
  int64_t device_memory_bytes = 0;  // per rank (GPU memory, or a CPU rank's budget)
  int64_t seq_len = 0;
  int64_t micro_batch = 1;
  int64_t global_batch = 0;  // 0: micro_batch x dp for each shape (no accumulation)
  Precision precision = Precision::bf16;
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  DeviceKind device = DeviceKind::cuda;
  // Axes the user fixed: a size >= 1 stays as given; 0 or -1 leaves the axis free. pp is fixed
  // at 1 unless the caller frees it (fixed.set(Axis::pp, 0)): pipelined shapes need a schedule
  // and micro-batches, which the caller then chooses.
  MeshShape fixed{0, 0, 0, 0};
  // The pipeline schedule pipelined shapes are judged with (core/pipeline_schedule.h).
  PipelineSchedule pp_schedule = PipelineSchedule::one_f_one_b;
  int pp_virtual_stages = 1;
  HardwareModel hardware = HardwareModel::h100();
  // Measured on the cluster (`meshwork calibrate`, core/calibration.h): replaces `hardware`'s
  // constants wherever it has a number (TimeEstimate says which).
  std::optional<Calibration> calibration;
  // Learnt from the cluster's stored runs (core/run_fit.h), fitted on the same base as
  // `calibration` (that calibration, or none): each term of the step times its factor.
  std::shared_ptr<const RunFit> fit;
  MemoryModel memory;
  std::optional<int64_t> reserve_bytes;      // unset: default_reserve_bytes(device)
  std::optional<AttentionKernel> attention;  // unset: default_attention_kernel(device)
  TrainerSupport trainer;  // what the trainer runs (meshtrain by default; core/parallel_layout.h)
};

struct PlanEntry {
  MeshShape shape;
  bool fits = false;
  MemoryBreakdown memory;
  TimeEstimate time;
  std::vector<Diagnostic> warnings;
  std::string accelerate_refusal;  // non-empty: Accelerate would refuse this shape (why)
};

struct RejectedShape {
  MeshShape shape;
  std::vector<Diagnostic> errors;
};

struct Plan {
  int64_t world_size = 0;
  std::string model_name;
  int64_t model_params = 0;
  std::vector<PlanEntry> shapes;      // valid shapes, best first
  std::vector<RejectedShape> rejected;  // shapes validation refused, in enumeration order
  bool any_fits() const;
};

// Every ordered factorization world = pp * dp_replicate * dp_shard * cp * tp with the fixed axes
// kept, in lexicographic order.
std::vector<MeshShape> enumerate_shapes(int64_t world_size, const MeshShape& fixed);

// An Error for invalid input (a count < 1, fixed axes that do not divide the world size) or
// when validation refuses every candidate shape (the first refusal's words).
Result<Plan> make_plan(const PlanQuery& query);

// The `meshwork plan --json` document:
// {"world_size", "model":{"name","params"}, "shapes":[{"dp_replicate","dp_shard","cp","tp",
//  "fits", "memory_bytes":{"params","grads","optimizer","activations","buffers","reserve",
//  "total"}, "step_time_s","step_band" (TimeEstimate::step_band; 0: unknown),"compute_s","tokens_per_s","mfu","comm_s":{"dp_replicate","dp_shard","cp","tp"},
//  "calibrated":{"compute","dp_replicate","dp_shard","cp","tp"} (true: from the calibration),
//  "fitted":{"compute","dp_replicate","dp_shard","cp","tp"} (true: corrected by the fit of past runs),
//  "warnings":["field: value: message", ...]}, ...]}   best first.
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace meshwork
