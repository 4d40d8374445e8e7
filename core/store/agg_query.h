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

}  // namespace meshwork::store
