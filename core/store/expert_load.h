// A mixture of experts' routing as the store keeps it (schema v6: moe_steps, expert_load): per
// step the aux loss, and per sparse layer the tokens each expert received over the global batch.
// The reads the expert-load views draw (the Monitor's heat map, the web view's
// /api/runs/ID/expert-load) are these functions; like trials.h they take the RunStore, the one
// door into the file. Ingest writes the rows (Ingester::store_expert_load).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/routing_imbalance.h"
#include "core/store/run_store.h"

namespace meshwork::store {

// The tokens of one layer at one step as stored: float64 per expert, little-endian (counts of a
// global batch are integers far below 2^53: exact).
std::string pack_expert_tokens(const std::vector<double>& tokens);
// An Error naming the blob's size when it is not a whole number of float64s.
Result<std::vector<double>> unpack_expert_tokens(std::string_view blob);

// One column of the heat map: a step, or consecutive steps when the run has more steps than the
// view has columns.
struct ExpertLoadColumn {
  int64_t first_step = 0;
  int64_t last_step = 0;         // == first_step for a column of one step
  std::vector<double> tokens;    // per expert; the mean over the column's steps
  double imbalance = 0;          // the largest max / mean of any of its steps (1 is even)
  std::optional<double> aux_loss;  // the mean over its steps (unset when none was stored)
};

struct ExpertLoadMap {
  int layer = 0;
  int experts = 0;               // rows of the heat map (the widest step's expert count)
  int64_t steps = 0;             // stored steps in the range
  std::vector<ExpertLoadColumn> columns;  // in step order
  // Over the whole range: the largest per-step imbalance and the step it was at.
  double max_imbalance = 0;
  int64_t max_imbalance_step = -1;
};

// tokens[e] / mean(tokens): the colour of a cell (1 = the expert got its fair share); all 0 when
// the column has no tokens.
std::vector<double> load_ratios(const std::vector<double>& tokens);

// The sparse layers of `run` that have stored routing, ascending; empty for a dense run.
Result<std::vector<int>> expert_load_layers(RunStore& store, RunId run);

// The heat map of `layer` of `run`: steps in [first_step, last_step] (whole run when unset), at
// most `max_columns` columns (>= 1): consecutive steps are merged into one column, evenly, when
// there are more. An Error for max_columns < 1.
Result<ExpertLoadMap> expert_load_map(RunStore& store, RunId run, int layer, int max_columns,
                                      std::optional<int64_t> first_step = std::nullopt,
                                      std::optional<int64_t> last_step = std::nullopt);

// How many of a run's latest steps the planner reads its routing from: enough for the imbalance
// to settle, few enough that a run of 100,000 steps is read in a moment.
inline constexpr int64_t kRoutingSteps = 1000;

// The stored steps of `run` (its latest `max_steps`) as core's MeasuredRouting
// (core/routing_imbalance.h), its source "run ID (NAME)": what the planner reads the imbalance of
// each ep from. An Error naming the run when it stored no routing (a dense run, or one of a
// trainer that records none).
Result<MeasuredRouting> measured_routing(RunStore& store, RunId run, int64_t max_steps = kRoutingSteps);

// A stored run whose routing can be a model's (MeasuredRouting::check_matches: its expert and
// sparse-layer counts): what the workbench's planner offers.
struct RoutingRun {
  RunId id = 0;
  std::string name;
  int64_t experts = 0;
  int sparse_layers = 0;
};
// The stored runs whose routing matches `model`, newest first, at most `limit`; none for a dense
// model. A few index seeks per stored run: no run's steps are read.
Result<std::vector<RoutingRun>> routing_runs(RunStore& store, const ModelSpec& model, int limit);

}  // namespace meshwork::store
