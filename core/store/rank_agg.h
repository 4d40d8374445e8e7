// Cross-rank aggregates (internal), kept at ingest: per (run, metric key, step) the count, sum,
// min and max of the value over the ranks that reported it, the ranks holding the min and the max
// (the fastest and slowest rank of a step time), and the x values and value of the lowest rank
// present (what a chart puts on its time / tokens axis, and the run's final loss).
//
// Why: a view across ranks (mean over 8,192 ranks) read every rank's series at query time,
// O(ranks x steps). With these rows it reads O(steps) rows of one range scan, whatever the rank
// count. Rows are merged, never recomputed: every point is added exactly once (only when its step
// row was newly inserted, see Ingester::on_step), and merging is order-free, so out-of-order and
// re-sent chunks give the same row as a recomputation from the raw points:
//   n = n_a + n_b, sum = sum_a + sum_b, min = min(min_a, min_b), max likewise;
//   min_rank = the lower rank when the two minima are equal (likewise max_rank, x_rank), so ties
//   resolve the same whatever the arrival order.
// NaN values are not points of a min/max chart: they are not counted (as in the buckets).
#pragma once

#include <cmath>
#include <cstdint>
#include <unordered_map>

#include <sqlite3.h>

#include "core/error.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

// The tables of schema version 4 (schema.cpp): the aggregates, and per-run running totals that
// get_run() reads instead of summing every rank's series (points stored, highest step, ranks
// that ended ok: counted as end records arrive, never recounted).
extern const char* const kRankAggTablesSql;

struct RankAgg {
  int64_t n = 0;
  double sum = 0, lo = 0, hi = 0;
  int lo_rank = 0, hi_rank = 0;
  int x_rank = 0;                      // lowest rank present
  double time = 0, tokens = 0, x_v = 0;  // its x values and value

  void add(int rank, double value, double t, double tok) {
    if (n++ == 0) {
      sum = lo = hi = value;
      lo_rank = hi_rank = x_rank = rank;
      time = t, tokens = tok, x_v = value;
      return;
    }
    sum += value;
    if (value < lo || (value == lo && rank < lo_rank)) lo = value, lo_rank = rank;
    if (value > hi || (value == hi && rank < hi_rank)) hi = value, hi_rank = rank;
    if (rank < x_rank) x_rank = rank, time = t, tokens = tok, x_v = value;
  }
};

struct AggKey {
  int64_t run, key, step;
  bool operator==(const AggKey&) const = default;
};
struct AggKeyHash {
  size_t operator()(const AggKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.run) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.key) * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.step) * 0x165667B19E3779F9ull + (h << 6) + (h >> 2);
    return h;
  }
};

// Collects the points of one transaction per (run, key, step) and merges them into rank_agg at
// its end: a batch of 8,192 ranks' lines of one step costs 15 upserts, not 8,192 x 15.
class RankAggWriter {
 public:
  explicit RankAggWriter(sqlite3* db);
  bool ok() const { return upsert_.ok() && stats_.ok(); }
  void add(int64_t run, int64_t key, int rank, int64_t step, double value, double time, double tokens) {
    if (std::isnan(value)) return;
    // Consecutive points of one line share (run, step) and walk the keys: remember the last one.
    pending_[AggKey{run, key, step}].add(rank, value, time, tokens);
    RunTotals& t = totals_[run];
    ++t.points;
    if (step > t.last_step) t.last_step = step;
  }
  Status flush();  // writes and clears what is pending
  void clear() {
    pending_.clear();
    totals_.clear();
  }

 private:
  struct RunTotals {
    int64_t points = 0;
    int64_t last_step = INT64_MIN;
  };
  sql::Stmt upsert_, stats_;
  std::unordered_map<AggKey, RankAgg, AggKeyHash> pending_;
  std::unordered_map<int64_t, RunTotals> totals_;
};

}  // namespace meshwork::store
