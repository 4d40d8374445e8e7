#include "core/store/agg_query.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/store/decimate.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

double x_of(XAxis x, int64_t step, double time, double tokens) {
  return x == XAxis::step ? static_cast<double>(step) : x == XAxis::time ? time : tokens;
}

// The aggregate's value from a row's count, sum, min and max.
//   mean = sum / n (n >= 1: rows exist only for a step some rank reported a number for)
double value_of(Aggregate a, int64_t n, double sum, double lo, double hi) {
  switch (a) {
    case Aggregate::mean: return sum / static_cast<double>(n);
    case Aggregate::min: return lo;
    case Aggregate::max: return hi;
    case Aggregate::sum:
    case Aggregate::none: break;
  }
  return sum;
}

// Step bounds of an x range on the step axis: [ceil(x0), floor(x1)], clamped to int64.
int64_t step_floor(double x) { return static_cast<int64_t>(std::floor(std::clamp(x, -9e18, 9e18))); }
int64_t step_ceil(double x) { return static_cast<int64_t>(std::ceil(std::clamp(x, -9e18, 9e18))); }
}  // namespace

Result<std::vector<Series>> query_rank_aggs(sqlite3* db, const SeriesQuery& q, int64_t key) {
  sql::Stmt first(db, "SELECT step, time, tokens FROM rank_agg WHERE run = ?1 AND key = ?2"
                      " ORDER BY step ASC LIMIT 1");
  sql::Stmt last(db, "SELECT step, time, tokens FROM rank_agg WHERE run = ?1 AND key = ?2"
                     " ORDER BY step DESC LIMIT 1");
  // On the step axis a range scan of the primary key; on time / tokens (which grow with the
  // step but have no index) the run's rows of the key, filtered: O(steps) either way.
  const char* x_col = q.x == XAxis::time ? "time" : "tokens";
  sql::Stmt rows(db, q.x == XAxis::step
                         ? std::string("SELECT step, n, sum, lo, hi, time, tokens FROM rank_agg"
                                       " WHERE run = ?1 AND key = ?2 AND step BETWEEN ?3 AND ?4"
                                       " ORDER BY step")
                         : std::string("SELECT step, n, sum, lo, hi, time, tokens FROM rank_agg"
                                       " WHERE run = ?1 AND key = ?2 AND ") +
                               x_col + " BETWEEN ?5 AND ?6 ORDER BY step");
  for (const sql::Stmt* s : {&first, &last, &rows})
    if (!s->ok()) return s->error();

  // Pass 1: the common x range of all runs (one chart, one x axis).
  double x0 = kInf, x1 = -kInf;
  std::vector<bool> has(q.runs.size(), false);
  for (size_t i = 0; i < q.runs.size(); ++i) {
    for (sql::Stmt* s : {&first, &last}) {
      s->bind(1, q.runs[i]).bind(2, key);
      Result<bool> row = s->step();
      if (!row) return row.error();
      if (!*row) break;
      const double x = x_of(q.x, s->int64(0), s->real(1), s->real(2));
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      has[i] = true;
      s->reset();
    }
  }
  if (q.x_min) x0 = *q.x_min;
  if (q.x_max) x1 = *q.x_max;

  // Pass 2: each run's rows in range, decimated on the common range.
  std::vector<Series> out;
  for (size_t i = 0; i < q.runs.size(); ++i) {
    Series series;
    series.run = q.runs[i];
    if (has[i] && x0 <= x1) {
      Decimator dec(x0, x1, q.pixels);
      rows.bind(1, q.runs[i]).bind(2, key);
      if (q.x == XAxis::step) rows.bind(3, step_ceil(x0)).bind(4, step_floor(x1));
      else rows.bind(5, x0).bind(6, x1);
      Status walked = rows.each_row([&] {
        const int64_t n = rows.int64(1);
        series.source_points += n;
        dec.add(x_of(q.x, rows.int64(0), rows.real(5), rows.real(6)),
                value_of(q.aggregate, n, rows.real(2), rows.real(3), rows.real(4)));
      });
      if (!walked) return walked.error();
      series.points = dec.finish();
    }
    out.push_back(std::move(series));
  }
  return out;
}

Result<bool> aggregates_read_less(sqlite3* db, const SeriesQuery& q, int64_t key) {
  sql::Stmt first(db, "SELECT step, time, tokens FROM rank_agg WHERE run = ?1 AND key = ?2"
                      " ORDER BY step ASC LIMIT 1");
  sql::Stmt last(db, "SELECT step, time, tokens, n FROM rank_agg WHERE run = ?1 AND key = ?2"
                     " ORDER BY step DESC LIMIT 1");
  if (!first.ok()) return first.error();
  if (!last.ok()) return last.error();
  double agg_rows = 0, bucket_rows = 0;
  for (RunId run : q.runs) {
    first.bind(1, run).bind(2, key);
    last.bind(1, run).bind(2, key);
    Result<bool> a = first.step();
    if (!a) return a.error();
    if (!*a) continue;
    Result<bool> b = last.step();
    if (!b) return b.error();
    const double x0 = x_of(q.x, first.int64(0), first.real(1), first.real(2));
    const double x1 = x_of(q.x, last.int64(0), last.real(1), last.real(2));
    const double steps = static_cast<double>(last.int64(0) - first.int64(0) + 1);
    const double ranks = static_cast<double>(last.int64(3));
    first.reset();
    last.reset();
    // The share of the run the x range covers (steps grow with time and tokens too).
    double share = 1;
    if ((q.x_min || q.x_max) && x1 > x0) {
      const double lo = std::max(x0, q.x_min.value_or(x0)), hi = std::min(x1, q.x_max.value_or(x1));
      share = std::clamp((hi - lo) / (x1 - x0), 0.0, 1.0);
    }
    agg_rows += steps * share;
    bucket_rows += ranks * std::min(steps * share, static_cast<double>(q.pixels));
  }
  return agg_rows <= std::max(static_cast<double>(kAggregateRowsAlways), bucket_rows);
}

Result<std::vector<StepExtremes>> RunStore::step_extremes(RunId run, std::string_view key,
                                                          int64_t first_step, int64_t last_step) {
  sql::Stmt q(db_, "SELECT a.step, a.n, a.sum, a.lo, a.lo_rank, a.hi, a.hi_rank FROM rank_agg a"
                   " JOIN keys k ON k.id = a.key AND k.name = ?2"
                   " WHERE a.run = ?1 AND a.step BETWEEN ?3 AND ?4 ORDER BY a.step");
  q.bind(1, run).bind(2, key).bind(3, first_step).bind(4, last_step);
  return q.collect([&] {
    StepExtremes e;
    e.step = q.int64(0);
    e.ranks = q.int64(1);
    e.mean = q.real(2) / static_cast<double>(std::max<int64_t>(1, e.ranks));
    e.min = q.real(3);
    e.min_rank = static_cast<int>(q.int64(4));
    e.max = q.real(5);
    e.max_rank = static_cast<int>(q.int64(6));
    return e;
  });
}

}  // namespace meshwork::store
