#include "core/store/rank_agg.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace meshwork::store {

const char* const kRankAggTablesSql = R"sql(
CREATE TABLE rank_agg(run INTEGER NOT NULL, key INTEGER NOT NULL, step INTEGER NOT NULL,
  n INTEGER NOT NULL, sum REAL NOT NULL, lo REAL NOT NULL, lo_rank INTEGER NOT NULL,
  hi REAL NOT NULL, hi_rank INTEGER NOT NULL, x_rank INTEGER NOT NULL, time REAL, tokens REAL,
  x_v REAL, PRIMARY KEY(run, key, step)) WITHOUT ROWID;
CREATE TABLE run_stats(run INTEGER PRIMARY KEY, points INTEGER NOT NULL DEFAULT 0,
  last_step INTEGER, ranks_ok INTEGER NOT NULL DEFAULT 0);
)sql";

namespace {
// The merge rules of rank_agg.h in SQL. In an UPDATE every right-hand side sees the old row, so
// each rank column can compare against the old value of its own min / max.
const char* const kUpsert = R"sql(
INSERT INTO rank_agg(run, key, step, n, sum, lo, lo_rank, hi, hi_rank, x_rank, time, tokens, x_v)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
ON CONFLICT(run, key, step) DO UPDATE SET n = n + excluded.n, sum = sum + excluded.sum,
  lo_rank = CASE WHEN excluded.lo < lo OR (excluded.lo = lo AND excluded.lo_rank < lo_rank)
                 THEN excluded.lo_rank ELSE lo_rank END,
  lo = min(lo, excluded.lo),
  hi_rank = CASE WHEN excluded.hi > hi OR (excluded.hi = hi AND excluded.hi_rank < hi_rank)
                 THEN excluded.hi_rank ELSE hi_rank END,
  hi = max(hi, excluded.hi),
  time = CASE WHEN excluded.x_rank < x_rank THEN excluded.time ELSE time END,
  tokens = CASE WHEN excluded.x_rank < x_rank THEN excluded.tokens ELSE tokens END,
  x_v = CASE WHEN excluded.x_rank < x_rank THEN excluded.x_v ELSE x_v END,
  x_rank = min(x_rank, excluded.x_rank)
)sql";

const char* const kStats = R"sql(
INSERT INTO run_stats(run, points, last_step) VALUES (?1, ?2, ?3)
ON CONFLICT(run) DO UPDATE SET points = points + excluded.points,
  last_step = max(coalesce(last_step, excluded.last_step), excluded.last_step)
)sql";
}  // namespace

RankAggWriter::RankAggWriter(sqlite3* db) : upsert_(db, kUpsert), stats_(db, kStats) {}

Status RankAggWriter::flush() {
  // Primary-key order: each upsert lands beside the previous one in the B-tree.
  std::vector<const std::pair<const AggKey, RankAgg>*> order;
  order.reserve(pending_.size());
  for (const auto& e : pending_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const auto* x, const auto* y) {
    return std::tie(x->first.run, x->first.key, x->first.step) <
           std::tie(y->first.run, y->first.key, y->first.step);
  });
  for (const auto* e : order) {
    const AggKey& k = e->first;
    const RankAgg& a = e->second;
    upsert_.bind(1, k.run).bind(2, k.key).bind(3, k.step).bind(4, a.n).bind(5, a.sum)
        .bind(6, a.lo).bind(7, a.lo_rank).bind(8, a.hi).bind(9, a.hi_rank).bind(10, a.x_rank)
        .bind(11, a.time).bind(12, a.tokens).bind(13, a.x_v);
    if (Status s = upsert_.run(); !s) {
      clear();
      return s;
    }
  }
  for (const auto& [run, t] : totals_) {
    if (Status s = stats_.bind(1, run).bind(2, t.points).bind(3, t.last_step).run(); !s) {
      clear();
      return s;
    }
  }
  clear();
  return Status::Ok();
}

}  // namespace meshwork::store
