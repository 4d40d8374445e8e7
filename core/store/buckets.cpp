#include "core/store/buckets.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace meshwork::store {

namespace {
// In an UPDATE every right-hand side sees the row as it was before the update, so the four
// columns of a point can each test the same condition against the old values.
const char* const kUpsert = R"sql(
INSERT INTO buckets(run, key, rank, level, bucket, n,
  f_step, f_time, f_tok, f_v, lo_step, lo_time, lo_tok, lo_v,
  hi_step, hi_time, hi_tok, hi_v, la_step, la_time, la_tok, la_v)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
        ?19, ?20, ?21, ?22)
ON CONFLICT(run, key, rank, level, bucket) DO UPDATE SET n = n + excluded.n,
  f_step = CASE WHEN excluded.f_step < f_step THEN excluded.f_step ELSE f_step END,
  f_time = CASE WHEN excluded.f_step < f_step THEN excluded.f_time ELSE f_time END,
  f_tok = CASE WHEN excluded.f_step < f_step THEN excluded.f_tok ELSE f_tok END,
  f_v = CASE WHEN excluded.f_step < f_step THEN excluded.f_v ELSE f_v END,
  lo_step = CASE WHEN excluded.lo_v < lo_v THEN excluded.lo_step ELSE lo_step END,
  lo_time = CASE WHEN excluded.lo_v < lo_v THEN excluded.lo_time ELSE lo_time END,
  lo_tok = CASE WHEN excluded.lo_v < lo_v THEN excluded.lo_tok ELSE lo_tok END,
  lo_v = CASE WHEN excluded.lo_v < lo_v THEN excluded.lo_v ELSE lo_v END,
  hi_step = CASE WHEN excluded.hi_v > hi_v THEN excluded.hi_step ELSE hi_step END,
  hi_time = CASE WHEN excluded.hi_v > hi_v THEN excluded.hi_time ELSE hi_time END,
  hi_tok = CASE WHEN excluded.hi_v > hi_v THEN excluded.hi_tok ELSE hi_tok END,
  hi_v = CASE WHEN excluded.hi_v > hi_v THEN excluded.hi_v ELSE hi_v END,
  la_step = CASE WHEN excluded.la_step >= la_step THEN excluded.la_step ELSE la_step END,
  la_time = CASE WHEN excluded.la_step >= la_step THEN excluded.la_time ELSE la_time END,
  la_tok = CASE WHEN excluded.la_step >= la_step THEN excluded.la_tok ELSE la_tok END,
  la_v = CASE WHEN excluded.la_step >= la_step THEN excluded.la_v ELSE la_v END
)sql";
}  // namespace

BucketWriter::BucketWriter(sqlite3* db) : upsert_(db, kUpsert) {}

Status BucketWriter::flush() {
  // In primary-key order: each upsert lands next to the previous one in the B-tree (appends to
  // the same pages) instead of at a random place (the hash map's order).
  std::vector<const std::pair<const BucketKey, BucketAgg>*> order;
  order.reserve(pending_.size());
  for (const auto& e : pending_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const auto* x, const auto* y) {
    const BucketKey& a = x->first;
    const BucketKey& b = y->first;
    return std::tie(a.run, a.key, a.rank, a.level, a.bucket) <
           std::tie(b.run, b.key, b.rank, b.level, b.bucket);
  });
  for (const auto* e : order) {
    const BucketKey& k = e->first;
    const BucketAgg& a = e->second;
    upsert_.bind(1, k.run).bind(2, k.key).bind(3, k.rank).bind(4, k.level).bind(5, k.bucket);
    upsert_.bind(6, a.n);
    int i = 7;
    for (const BucketPoint* p : {&a.first, &a.min, &a.max, &a.last}) {
      upsert_.bind(i, p->step).bind(i + 1, p->time).bind(i + 2, p->tokens).bind(i + 3, p->value);
      i += 4;
    }
    if (Status s = upsert_.run(); !s) {
      clear();
      return s;
    }
  }
  clear();
  return Status::Ok();
}

}  // namespace meshwork::store
