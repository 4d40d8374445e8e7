// Chart series over every rank, read from the cross-rank aggregates kept at ingest (internal; see
// rank_agg.h). RunStore::query_series() sends an aggregate query without a rank subset here.
#pragma once

#include <cstdint>
#include <vector>

#include <sqlite3.h>

#include "core/error.h"
#include "core/store/run_store.h"

namespace meshwork::store {

// One decimated series per run in q.runs (same order) of the mean / min / max / sum over the
// ranks at each step of `key` (its id). x: the step, or the time / cumulative tokens of the
// lowest rank present at that step (as the per-rank path takes the x of the lowest rank).
Result<std::vector<Series>> query_rank_aggs(sqlite3* db, const SeriesQuery& q, int64_t key);

// Which path reads fewer rows for an aggregate over every rank: the aggregates read one row per
// step in range; each rank's chart buckets read ~pixels rows per rank (plus raw edges), whatever
// the run's length. So the aggregates win for many ranks (8,192 ranks x 800 columns = 6.5M rows
// against 10,000), the buckets for a long run of few ranks (8 ranks x 800 = 6,400 rows against
// 125,000). Below kAggregateRowsAlways rows the aggregates are used anyway (exact per step).
inline constexpr int64_t kAggregateRowsAlways = 20000;
Result<bool> aggregates_read_less(sqlite3* db, const SeriesQuery& q, int64_t key);

}  // namespace meshwork::store
