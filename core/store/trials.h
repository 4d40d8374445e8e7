// Trials in the run store: the planner's top K shapes launched one after another for a few steps
// each (`meshwork plan ... --try K --steps N`, the workbench's "Try the top K"), kept as a group of
// runs with what the planner predicted for each, and read back ranked by what they measured.
//
// Schema (its own migration step, applied by ensure_trial_tables() on first use of any function
// here; idempotent, independent of schema_version, as calibration_store.h does):
//   trials(id INTEGER PRIMARY KEY, created REAL, plan_json TEXT)   one group; plan_json: what was
//       planned and tried ({"planned_by", "steps", "k", "plan" | "rows", ...}: free-form, kept as given)
//   trial_runs(trial, position, run, shape, predicted_tokens_per_s, predicted_step_s,
//              predicted_peak_bytes, error)
//       one shape of the group, in the planner's order (position 1 = its best); run: the launched
//       run (NULL until launched, or when the launch failed before a run existed: then `error`
//       says why). Deleting a run leaves the row (shown as "deleted").
//
// Measured, from the runs themselves: the status and exit reason of the run, its tokens/s
// (run_tokens_per_s: rank 0's mean over its last <= 10 steps times the data-parallel replicas,
// what the Runs view shows) and its peak memory per rank (the highest mem_peak_bytes of any rank
// at any step, docs/metrics.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "core/error.h"
#include "core/mesh.h"
#include "core/store/run_store.h"

namespace meshwork::store {

using TrialId = int64_t;

// A trial's status words besides the run statuses (kStatus*): no run exists for the shape.
inline constexpr std::string_view kTrialPending = "pending";             // not launched (yet)
inline constexpr std::string_view kTrialNotLaunched = "not launched";   // the launch failed: error says why
inline constexpr std::string_view kTrialRunDeleted = "deleted";         // its run was deleted from the store

Status ensure_trial_tables(sqlite3* db);

// What the planner said about one shape (core/planner.h's PlanEntry): tokens/s of the whole mesh,
// the optimizer step's seconds and the per-rank memory at its peak.
struct TrialPrediction {
  MeshShape shape;
  double tokens_per_s = 0;
  double step_s = 0;
  int64_t peak_bytes = 0;
};

// A new, empty group; `plan` is stored as given.
Result<TrialId> create_trial(RunStore& store, const nlohmann::json& plan);
// The shape at `position` (1-based, the planner's order) with its prediction, no run yet.
Status add_trial_entry(RunStore& store, TrialId trial, int position, const TrialPrediction& predicted);
// The run launched for `position` (clears any error).
Status set_trial_run(RunStore& store, TrialId trial, int position, RunId run);
// The launch of `position` failed before a run existed: why.
Status set_trial_error(RunStore& store, TrialId trial, int position, std::string_view error);

struct TrialResult {
  int position = 0;
  TrialPrediction predicted;
  std::optional<RunId> run;
  std::string run_name;
  std::string status;  // the run's (kStatus*), or kTrialPending / kTrialNotLaunched / kTrialRunDeleted
  std::string reason;  // the run's exit reason, or the launch's error
  std::optional<double> tokens_per_s;  // measured (run_tokens_per_s)
  std::optional<double> peak_bytes;    // measured: max mem_peak_bytes over ranks and steps
  // (measured - predicted) / predicted in percent; unset without both.
  std::optional<double> tokens_error_percent() const;
  std::optional<double> peak_error_percent() const;
  bool measured() const { return tokens_per_s.has_value(); }
};

struct Trial {
  TrialId id = 0;
  double created = 0;  // unix seconds
  nlohmann::json plan = nlohmann::json::object();
  // Ranked by measured tokens/s, highest first: first the runs that ended ok (or still run), then
  // measured runs that failed or were stopped, then the shapes without a measurement by position.
  std::vector<TrialResult> results;
  // The best measured shape whose run ended ok, or nullptr.
  const TrialResult* winner() const;
};

// Orders results as Trial::results is ordered (stable; ties keep the planner's order).
void rank_trial_results(std::vector<TrialResult>& results);

// A group with everything measured so far (runs still going are read as they are).
Result<Trial> load_trial(RunStore& store, TrialId id);

struct TrialSummary {
  TrialId id = 0;
  double created = 0;
  int shapes = 0;
};
// Every group, newest first.
Result<std::vector<TrialSummary>> list_trials(RunStore& store);

// The highest mem_peak_bytes any rank reported at any step of `run`; unset when none was.
Result<std::optional<double>> measured_peak_bytes(RunStore& store, RunId run);

// {"id","created","plan","winner": position|null, "results":[{"position","shape":{...},"run",
//  "name","status","reason","measured":{"tokens_per_s","peak_bytes"},"predicted":
//  {"tokens_per_s","step_s","peak_bytes"},"tokens_per_s_error_percent","peak_error_percent"}]}
// ranked as results are; unknown numbers are null.
nlohmann::json to_json(const Trial& trial);

}  // namespace meshwork::store
