// Metrics JSON lines, version 1: the contract between meshtrain (writer) and the workbench's
// store (reader). Documented for users in docs/metrics.md. One JSON object per line:
//   {"v":1,"type":"start", "rank":r, "time":unix_s, "host":..., "pid":..., "node":n,
//    "world":N, "mesh":{axes}, "config":{run config}, "versions":{...}}
//   {"v":1,"type":"step","step":k,"rank":r,"time":unix_s,"loss":..,"lr":..,"grad_norm":..,
//    "tokens":..,"tokens_per_s":..,"tflops":..,"mfu":..,"mem_bytes":..,"mem_peak_bytes":..,
//    "comm_s":{"dp_replicate":..,"dp_shard":..,"cp":..,"tp":..},"compute_s":..,"step_s":..,
//    "cpu_s":..}   (cpu_s optional: records written before it read without it)
//   (comm_s also holds "pp" from a pipelined run and "ep", the experts' all-to-all, from an
//   expert-parallel one)
//   {"v":1,"type":"end","rank":r,"time":unix_s,"status":"ok|failed|stopped","reason":"..."}
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mesh.h"

namespace meshwork {

inline constexpr int kMetricsVersion = 1;

struct StartRecord {
  int rank = 0;
  double time = 0;
  std::string host;
  int64_t pid = 0;
  int node = 0;
  int world = 1;
  MeshShape mesh;
  nlohmann::json config = nlohmann::json::object();  // the run config the rank runs, as read
  double peak_tflops = 0;  // the per-rank peak MFU is computed against (given or measured)
  nlohmann::json versions = nlohmann::json::object();
};

// A mixture of experts' routing in one step (docs/metrics.md, "moe"): per sparse layer, the
// tokens each expert received over the whole global batch (every micro-batch of every
// data-parallel rank; a token counts once per expert among its top-k), and the load-balancing
// loss (transformers' load_balancing_loss_func) averaged over the step's forward calls.
struct ExpertLoad {
  int layer = 0;
  std::vector<double> tokens;  // per expert
  double min = 0, max = 0;
  double imbalance = 0;        // max / mean; 1 is perfectly even
  bool operator==(const ExpertLoad&) const = default;
};
struct MoeStepMetrics {
  double aux_loss = 0;
  std::vector<ExpertLoad> layers;
  bool operator==(const MoeStepMetrics&) const = default;
};
// min, max and imbalance of `tokens` (all 0 for no tokens).
ExpertLoad expert_load(int layer, std::vector<double> tokens);

struct StepRecord {
  int64_t step = 0;
  int rank = 0;
  double time = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  int64_t tokens = 0;          // tokens of this step, counted once per data-parallel replica
  double tokens_per_s = 0;
  double tflops = 0;           // achieved model TFLOP/s of this rank
  double mfu = 0;              // fraction of peak, 0..1
  int64_t mem_bytes = 0;
  int64_t mem_peak_bytes = 0;
  AxisArray<double> comm_s;  // seconds in each axis' collectives
  double comm_ep_s = 0;      // seconds in the expert all-to-all ("comm_s":{"ep":..}); 0 without ep
  double compute_s = 0;
  double step_s = 0;
  // CPU seconds the rank's process ran during the step (every thread, user + system). Beside
  // step_s it tells a rank that was not running (stopped, descheduled, throttled) from one that
  // computed longer. Unset in records of older meshtrains.
  std::optional<double> cpu_s;
  std::optional<MoeStepMetrics> moe;  // mixtures of experts only (the "moe" key)
};

struct EndRecord {
  int rank = 0;
  double time = 0;
  std::string status = "ok";  // ok | failed | stopped
  std::string reason;
};

// Validation loss on the held-out data (--eval-data), written by every rank after the step it
// follows: the mean next-token loss over `tokens` held-out tokens (equal on every rank).
struct EvalRecord {
  int64_t step = 0;     // the last completed step (0-based, as step records count)
  int rank = 0;
  double time = 0;
  double loss = 0;
  int64_t tokens = 0;   // held-out tokens the mean is over
  double eval_s = 0;    // seconds the evaluation took
};

// One measurement of `meshtrain calibrate` (trainer/calibrate.cpp; docs/metrics.md): `kind` is
// "node" (host, node, cores, device_name, ranks_per_node), "matmul" (precision, threads,
// ranks_per_node, m, n, k, seconds, iterations) or "collective" (op, link, group_size, bytes,
// seconds, iterations); `fields` holds the kind's fields as written. core/calibration_samples.h
// turns records into samples.
struct CalibrationRecord {
  int rank = 0;
  double time = 0;
  std::string kind;
  nlohmann::json fields = nlohmann::json::object();
};

using MetricsRecord = std::variant<StartRecord, StepRecord, EndRecord, EvalRecord, CalibrationRecord>;

// A record's member and its name in the JSON line.
template <class R, class T>
struct Field {
  const char* name;
  T R::*member;
};
// Spelled out for compilers without aggregate deduction (clang < 17 builds the fuzz targets).
template <class R, class T>
Field(const char*, T R::*) -> Field<R, T>;

// Calls f(name, r.*member) for each Field of `fields` (a tuple), in order. R may be const.
template <class R, class Fields, class F>
void for_each_field(R& r, const Fields& fields, F&& f) {
  std::apply([&](const auto&... field) { (f(field.name, r.*field.member), ...); }, fields);
}

// The scalar members of a step record: the one list that writers and readers of step lines
// share. Left out: "step" and "rank" (a reader requires them) and "comm_s" (an object).
inline constexpr std::tuple kStepScalars{
    Field{"time", &StepRecord::time},           Field{"loss", &StepRecord::loss},
    Field{"lr", &StepRecord::lr},               Field{"grad_norm", &StepRecord::grad_norm},
    Field{"tokens", &StepRecord::tokens},       Field{"tokens_per_s", &StepRecord::tokens_per_s},
    Field{"tflops", &StepRecord::tflops},       Field{"mfu", &StepRecord::mfu},
    Field{"mem_bytes", &StepRecord::mem_bytes}, Field{"mem_peak_bytes", &StepRecord::mem_peak_bytes},
    Field{"compute_s", &StepRecord::compute_s}, Field{"step_s", &StepRecord::step_s}};

std::string to_json_line(const StartRecord& r);  // no trailing newline
std::string to_json_line(const StepRecord& r);
std::string to_json_line(const EndRecord& r);
std::string to_json_line(const EvalRecord& r);
std::string to_json_line(const CalibrationRecord& r);

// Parses one line. A malformed line, a wrong version or an unknown type is an Error that says
// which (callers count and report them; never fatal).
Result<MetricsRecord> parse_metrics_line(std::string_view line);

// The scalar series of a step record, as stored: "loss", "lr", "grad_norm", "tokens",
// "tokens_per_s", "tflops", "mfu", "mem_bytes", "mem_peak_bytes", "comm_s.dp_replicate",
// "comm_s.dp_shard", "comm_s.cp", "comm_s.tp", "compute_s", "step_s", "comm_s.pp", "comm_s.ep",
// "cpu_s" (NaN for an unset cpu_s).
std::vector<std::pair<std::string, double>> step_series(const StepRecord& r);
const std::vector<std::string>& step_series_keys();
// The stored series of an eval record: "eval_loss" (its loss at its step).
inline constexpr const char* kEvalLossKey = "eval_loss";
// The stored series of one axis's collective time: "comm_s.tp".
std::string comm_key(Axis axis);
// The expert all-to-all's key, "comm_s.ep" (in the step line and a stored series).
std::string comm_ep_key();

}  // namespace meshwork
