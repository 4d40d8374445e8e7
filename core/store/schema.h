// Schema of the run store and its migrations. Version 1 was the first, plain layout (metrics with
// text keys and a time per point); version 2 stored one row per point (run, key, rank, step);
// version 3 (docs/store.md) stores one row per (run, rank, step) with the values of meshtrain's
// 15 step series as columns, and keeps `metrics` as a view with the v2 columns; version 4 adds
// the cross-rank aggregates (rank_agg) and per-run totals (run_stats), see rank_agg.h; version 5
// adds the pipeline axis' series (comm_s.pp, the 16th column); version 6 the expert all-to-all's
// (comm_s.ep, the 17th) and the mixtures of experts' routing per step (moe_steps, expert_load);
// version 7 the step's CPU time (cpu_s, the 18th).
// open() migrates older databases in one transaction, keeping every run and point.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <sqlite3.h>

#include "core/error.h"

namespace meshwork::store {

inline constexpr int kSchemaVersion = 7;

// The `steps` column holding series i of step_series_keys() ("comm_s.tp" -> "v_comm_s_tp"); bit i
// of steps.present says the point exists (its value may be NULL: NaN). Keys without a column
// (only ever from a migrated version-1 database) live in `metrics_extra`.
const std::vector<std::string>& value_columns();

// The version-1 layout, kept verbatim so tests can build an old database and migrate it.
extern const char* const kSchemaV1;

// Reads the stored version (0 for an empty database).
Result<int> read_schema_version(sqlite3* db);
// Creates the current schema on an empty database or migrates an older one; an Error for a
// database written by a newer Meshwork (never touched).
// `after_migration` runs inside the migration's transaction (to rebuild derived tables).
Status ensure_schema(sqlite3* db, const std::function<Status()>& after_migration);

}  // namespace meshwork::store
