// Decimated chart queries and CSV export.
//
// How a query stays fast for millions of points: for each run it picks the coarsest bucket level
// whose buckets are at most one decimation bucket wide (decimate.h: 1.5 pixel columns), reads
// the stored first/min/max/last of those buckets (a few thousand rows), and reads raw points only
// for the two edge buckets of the range (so the range's first/last points and the extremes near
// its ends are exact). Every point returned is a real stored point; a bucket's min and max are
// always among the candidates, so a single spike in millions of points survives. Small ranges
// (no level fine enough) are decimated from raw points.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <tuple>

#include "core/metrics.h"
#include "core/store/agg_query.h"
#include "core/store/buckets.h"
#include "core/store/decimate.h"
#include "core/store/schema.h"
#include "core/store/run_store.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

std::string_view to_string(XAxis x) {
  switch (x) {
    case XAxis::step: return "step";
    case XAxis::tokens: return "tokens";
    case XAxis::time: return "time";
  }
  return "step";
}

std::string_view to_string(Aggregate a) {
  switch (a) {
    case Aggregate::none: return "none";
    case Aggregate::mean: return "mean";
    case Aggregate::min: return "min";
    case Aggregate::max: return "max";
    case Aggregate::sum: return "sum";
  }
  return "none";
}

Result<XAxis> parse_x_axis(std::string_view text) {
  for (XAxis x : {XAxis::step, XAxis::tokens, XAxis::time})
    if (text == to_string(x)) return x;
  return Error{"x", std::string(text), "allowed: step, tokens, time"};
}

Result<Aggregate> parse_aggregate(std::string_view text) {
  for (Aggregate a : {Aggregate::none, Aggregate::mean, Aggregate::min, Aggregate::max,
                      Aggregate::sum})
    if (text == to_string(a)) return a;
  return Error{"aggregate", std::string(text), "allowed: none, mean, min, max, sum"};
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct XPoint {  // a stored point with all three x values
  int64_t step = 0;
  double time = 0, tokens = 0, value = 0;
  double x(XAxis axis) const {
    return axis == XAxis::step ? static_cast<double>(step) : axis == XAxis::time ? time : tokens;
  }
};

struct BucketRow {  // first, min, max, last of one bucket
  int64_t bucket = 0;
  std::array<XPoint, 4> p;
};

struct Extent {  // one rank's series, from its level-0 bucket
  int rank = 0;
  int64_t n = 0;
  XPoint first, last;
};

XPoint read_xpoint(sql::Stmt& q, int col) {
  return XPoint{q.int64(col), q.real(col + 1), q.real(col + 2), q.real(col + 3)};
}

double combine(Aggregate a, const std::vector<double>& v) {
  double out = a == Aggregate::min ? kInf : a == Aggregate::max ? -kInf : 0.0;
  for (double x : v) {
    if (a == Aggregate::min) out = std::min(out, x);
    else if (a == Aggregate::max) out = std::max(out, x);
    else out += x;
  }
  if (a == Aggregate::mean && !v.empty()) out /= static_cast<double>(v.size());
  return out;
}

// The bucket rows of a range; x values the query's axis does not use are not decoded (constant 0).
std::string bucket_sql(XAxis x) {
  std::string cols = "bucket, n";
  for (const char* p : {"f", "lo", "hi", "la"}) {
    const std::string q(p);
    cols += ", " + q + "_step, " + (x == XAxis::time ? q + "_time" : "0.0") + ", " +
            (x == XAxis::tokens ? q + "_tok" : "0.0") + ", " + q + "_v";
  }
  return "SELECT " + cols + " FROM buckets WHERE run = ?1 AND key = ?2 AND rank = ?3 AND level = ?4"
         " AND bucket BETWEEN ?5 AND ?6 ORDER BY bucket";
}

// Raw points of a step series: its column of the step rows (schema.cpp, version 3), with the
// x value of the same row (only the one the axis needs). ?1 run, ?2 rank, ?3..?4 step range.
// Columns: step, value, present, x. Absent (present bit clear) and NULL values are skipped by
// the caller: cheaper than asking SQL to test every row.
std::string raw_column_sql(int col, XAxis x) {
  return "SELECT step, " + value_columns()[static_cast<size_t>(col)] + ", present, " +
         (x == XAxis::time ? "time" : x == XAxis::tokens ? "tokens" : "0.0") +
         " FROM steps WHERE run = ?1 AND rank = ?2 AND step BETWEEN ?3 AND ?4 ORDER BY step";
}

// The first (ASC) or last (DESC) point of one rank's series: step, time, tokens.
// ?1 run, ?2 rank, ?3 key (metrics_extra only).
std::string edge_sql(int col, const char* order) {
  if (col >= 0)
    return std::string("SELECT step, time, tokens FROM steps WHERE run = ?1 AND rank = ?2"
                       " ORDER BY step ") + order + " LIMIT 1";
  return std::string("SELECT m.step, coalesce(s.time, 0), coalesce(s.tokens, 0) FROM metrics_extra m"
                     " LEFT JOIN steps s ON s.run = m.run AND s.rank = m.rank AND s.step = m.step"
                     " WHERE m.run = ?1 AND m.key = ?3 AND m.rank = ?2 ORDER BY m.step ") +
         order + " LIMIT 1";
}

// Reads one run's series for a query. Holds the prepared statements of one query call.
class SeriesReader {
 public:
  // `col`: the key's value column in `steps` (schema.h), or -1 for a key in metrics_extra.
  SeriesReader(sqlite3* db, const SeriesQuery& q, int64_t key, int col)
      : q_(q), key_(key), col_(col),
        // A rank's first and last point: two seeks into its rows. (Not the level-0 bucket: that
        // is written when a rank ends, open_buckets.h, and a live chart needs the extent now.)
        next_rank_(db, col >= 0 ? "SELECT min(rank) FROM steps WHERE run = ?1 AND rank > ?2"
                                : "SELECT min(rank) FROM metrics_extra WHERE run = ?1 AND key = ?3"
                                  " AND rank > ?2"),
        edge_first_(db, edge_sql(col, "ASC")),
        edge_last_(db, edge_sql(col, "DESC")),
        raw_step_(db, col >= 0 ? raw_column_sql(col, q.x)
                               : "SELECT step, value FROM metrics_extra WHERE run = ?1 AND key = ?2"
                                 " AND rank = ?3 AND step BETWEEN ?4 AND ?5 AND value IS NOT NULL"
                                 " ORDER BY step"),
        raw_x_(db, "SELECT step, time, tokens FROM steps WHERE run = ?1 AND rank = ?2"
                   " AND step BETWEEN ?3 AND ?4 ORDER BY step"),
        buckets_(db, bucket_sql(q.x)),
        step_at_(db, "SELECT step, time, tokens FROM steps WHERE run = ?1 AND rank = ?2"
                     " AND step >= ?3 ORDER BY step LIMIT 1") {}

  Status prepared() const {
    for (const sql::Stmt* s : {&next_rank_, &edge_first_, &edge_last_, &raw_step_, &raw_x_, &buckets_, &step_at_})
      if (!s->ok()) return s->error();
    return Status::Ok();
  }

  // The ranks the query reads for `run` (one, or the subset of an aggregate), with their
  // extents; a rank without points has none.
  Result<std::vector<Extent>> extents(RunId run) {
    std::vector<Extent> out;
    std::vector<int> ranks = q_.aggregate == Aggregate::none ? std::vector<int>{q_.rank} : q_.ranks;
    if (q_.aggregate != Aggregate::none && q_.ranks.empty()) {  // every rank: one seek each
      for (int64_t after = std::numeric_limits<int64_t>::min();;) {
        next_rank_.bind(1, run).bind(2, after);
        if (col_ < 0) next_rank_.bind(3, key_);
        Result<bool> row = next_rank_.step();
        if (!row) return row.error();
        if (!*row || next_rank_.is_null(0)) {
          next_rank_.reset();
          break;
        }
        after = next_rank_.int64(0);
        next_rank_.reset();
        ranks.push_back(static_cast<int>(after));
      }
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    for (int rank : ranks) {
      Extent e{rank, 0, {}, {}};
      bool found = true;
      for (auto [stmt, point] : {std::pair{&edge_first_, &e.first}, std::pair{&edge_last_, &e.last}}) {
        stmt->bind(1, run).bind(2, rank);
        if (col_ < 0) stmt->bind(3, key_);
        Result<bool> row = stmt->step();
        if (!row) return row.error();
        if (!*row) {
          found = false;
          break;
        }
        *point = XPoint{stmt->int64(0), stmt->real(1), stmt->real(2), 0};
        stmt->reset();
      }
      if (found) out.push_back(e);
    }
    return out;
  }

  // Raw points of one rank with step in [s0, s1], in step order.
  // Time and tokens come from `steps`: two range scans merged by step (cheaper than a join,
  // which would look every point's step up in the primary key).
  Status raw(RunId run, int rank, int64_t s0, int64_t s1, std::vector<XPoint>& out) {
    if (s0 > s1) return Status::Ok();
    const size_t first = out.size();
    if (col_ >= 0) {  // one range scan of the step rows: x values and the value in one row
      raw_step_.bind(1, run).bind(2, rank).bind(3, s0).bind(4, s1);
      return raw_step_.each_row([&] {
        if (!((raw_step_.int64(2) >> col_) & 1) || raw_step_.is_null(1)) return;
        XPoint p{raw_step_.int64(0), 0, 0, raw_step_.real(1)};
        (q_.x == XAxis::time ? p.time : p.tokens) = raw_step_.real(3);  // the axis' x only
        out.push_back(p);
      });
    }
    raw_step_.bind(1, run).bind(2, key_).bind(3, rank).bind(4, s0).bind(5, s1);
    if (Status s = raw_step_.each_row(
            [&] { out.push_back(XPoint{raw_step_.int64(0), 0, 0, raw_step_.real(1)}); });
        !s)
      return s;
    if (q_.x == XAxis::step || out.size() == first) return Status::Ok();
    raw_x_.bind(1, run).bind(2, rank).bind(3, out[first].step).bind(4, out.back().step);
    size_t i = first;
    return raw_x_.each_row([&] {
      const int64_t step = raw_x_.int64(0);
      while (i < out.size() && out[i].step < step) ++i;
      if (i < out.size() && out[i].step == step) {
        out[i].time = raw_x_.real(1);
        out[i].tokens = raw_x_.real(2);
      }
    });
  }

  // Bucket candidates (first, min, max, last of each bucket in [b0, b1]) of one rank, in x order
  // per bucket; `n` accumulates the points they stand for.
  Status bucket_points(RunId run, int rank, int level, int64_t b0, int64_t b1,
                       std::vector<BucketRow>& out, int64_t& n) {
    if (b0 > b1) return Status::Ok();
    buckets_.bind(1, run).bind(2, key_).bind(3, rank).bind(4, level).bind(5, b0).bind(6, b1);
    return buckets_.each_row([&] {
      n += buckets_.int64(1);
      out.push_back(BucketRow{buckets_.int64(0),
                              {read_xpoint(buckets_, 2), read_xpoint(buckets_, 6),
                               read_xpoint(buckets_, 10), read_xpoint(buckets_, 14)}});
    });
  }

  // The first stored step of `rank` whose x is >= x (x grows with the step: binary search over
  // the primary key, ~log2(steps) lookups). Returns last.step + 1 when none.
  Result<int64_t> first_step_at_or_after(RunId run, const Extent& e, double x) {
    if (q_.x == XAxis::step) return static_cast<int64_t>(std::ceil(std::max(x, -9e18)));
    int64_t lo = e.first.step, hi = e.last.step + 1;  // answer in [lo, hi]
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      step_at_.bind(1, run).bind(2, e.rank).bind(3, mid);
      Result<bool> row = step_at_.step();
      if (!row) return row.error();
      if (!*row) {
        hi = mid;
        continue;
      }
      const XPoint p{step_at_.int64(0), step_at_.real(1), step_at_.real(2), 0};
      step_at_.reset();
      if (p.x(q_.x) >= x) hi = mid;
      else lo = p.step + 1;
    }
    return lo;
  }

 private:
  const SeriesQuery& q_;
  int64_t key_;
  int col_;
  sql::Stmt next_rank_, edge_first_, edge_last_, raw_step_, raw_x_, buckets_, step_at_;
};

// Walks per-rank lists, each sorted by key(item), one key at a time in increasing order:
// at_key(items) gets the items of that key, one per rank that has it, lowest rank first.
template <class T, class Key, class F>
void merge_by_key(const std::vector<std::vector<T>>& per_rank, Key key, F&& at_key) {
  std::vector<size_t> head(per_rank.size(), 0);
  std::vector<const T*> items;
  for (;;) {
    int64_t k = std::numeric_limits<int64_t>::max();
    for (size_t r = 0; r < per_rank.size(); ++r)
      if (head[r] < per_rank[r].size()) k = std::min(k, key(per_rank[r][head[r]]));
    if (k == std::numeric_limits<int64_t>::max()) return;
    items.clear();
    for (size_t r = 0; r < per_rank.size(); ++r)
      if (head[r] < per_rank[r].size() && key(per_rank[r][head[r]]) == k)
        items.push_back(&per_rank[r][head[r]++]);
    at_key(items);
  }
}

// Merges per-rank point lists (each sorted by step) into one aggregated list per step.
std::vector<XPoint> aggregate_raw(const std::vector<std::vector<XPoint>>& per_rank, Aggregate a) {
  std::vector<XPoint> out;
  std::vector<double> values;
  merge_by_key(per_rank, [](const XPoint& p) { return p.step; },
               [&](const std::vector<const XPoint*>& at) {
                 values.clear();
                 for (const XPoint* p : at) values.push_back(p->value);
                 XPoint p = *at.front();  // x of the lowest rank present
                 p.value = combine(a, values);
                 out.push_back(p);
               });
  return out;
}

}  // namespace

Result<std::vector<Series>> RunStore::query_series(const SeriesQuery& q) {
  if (q.pixels < 1 || q.pixels > 100000)
    return Error{"pixels", std::to_string(q.pixels), "allowed: 1 to 100000 pixel columns"};
  if (q.x_min && q.x_max && *q.x_min > *q.x_max)
    return Error{"x range", std::to_string(*q.x_min) + ".." + std::to_string(*q.x_max),
                 "the start must not exceed the end"};
  std::vector<Series> out;
  sql::Stmt key_q(db_, "SELECT id, coalesce(col, -1) FROM keys WHERE name = ?1");
  key_q.bind(1, q.key);
  Result<bool> key_row = key_q.step();
  if (!key_row) return key_row.error();
  if (!*key_row) {
    std::string allowed = "a metric key, e.g.";
    for (const std::string& k : step_series_keys()) allowed += " " + k;
    return Error{"key", q.key, allowed};
  }
  const int64_t key = key_q.int64(0);
  int col = static_cast<int>(key_q.int64(1));
  if (col >= static_cast<int>(value_columns().size())) col = -1;
  key_q.reset();

  // Over every rank: the cross-rank aggregates kept at ingest (agg_query.cpp), never the ranks'
  // series. Per rank (or a subset of ranks): below.
  if (q.aggregate != Aggregate::none && q.ranks.empty()) {
    Result<bool> cheaper = aggregates_read_less(db_, q, key);
    if (!cheaper) return cheaper.error();
    if (*cheaper) return query_rank_aggs(db_, q, key);
  }

  SeriesReader reader(db_, q, key, col);
  if (Status s = reader.prepared(); !s) return s.error();

  // Pass 1: extents, and the common x range of all runs (one chart, one x axis).
  std::vector<std::vector<Extent>> extents;
  double x0 = kInf, x1 = -kInf;
  for (RunId run : q.runs) {
    Result<std::vector<Extent>> e = reader.extents(run);
    if (!e) return e.error();
    for (const Extent& r : *e) {
      x0 = std::min(x0, r.first.x(q.x));
      x1 = std::max(x1, r.last.x(q.x));
    }
    extents.push_back(std::move(*e));
  }
  if (q.x_min) x0 = *q.x_min;
  if (q.x_max) x1 = *q.x_max;
  const int nb = std::max(1, q.pixels * 2 / 3);  // decimation buckets (decimate.h)

  // Pass 2: per run, candidates from buckets or raw points, decimated on the common range.
  for (size_t i = 0; i < q.runs.size(); ++i) {
    const RunId run = q.runs[i];
    Series series;
    series.run = run;
    const std::vector<Extent>& ranks = extents[i];
    if (ranks.empty() || x0 > x1) {
      out.push_back(std::move(series));
      continue;
    }
    // Steps per decimation bucket for this run: its steps per unit of x times the bucket width.
    const Extent& ref = ranks.front();
    const double run_dx = ref.last.x(q.x) - ref.first.x(q.x);
    const double steps_per_x =
        run_dx > 0 ? static_cast<double>(ref.last.step - ref.first.step) / run_dx : 0.0;
    const double steps_per_bucket = (x1 - x0) / nb * steps_per_x;
    int level = 0;
    for (int k = kBucketLevels; k >= 1; --k)
      if (static_cast<double>(bucket_steps(k)) <= steps_per_bucket) {
        level = k;
        break;
      }
    series.lod_level = level;

    Decimator dec(x0, x1, q.pixels);
    std::vector<std::vector<XPoint>> raw_head(ranks.size()), raw_tail(ranks.size());
    std::vector<std::vector<BucketRow>> mid(ranks.size());
    for (size_t r = 0; r < ranks.size(); ++r) {
      const Extent& e = ranks[r];
      Result<int64_t> s0 = reader.first_step_at_or_after(run, e, x0);
      if (!s0) return s0.error();
      Result<int64_t> after = reader.first_step_at_or_after(run, e, std::nextafter(x1, kInf));
      if (!after) return after.error();
      const int64_t lo = std::max(*s0, e.first.step), hi = std::min(*after - 1, e.last.step);
      if (level == 0 || bucket_of(hi, level) - bucket_of(lo, level) < 2) {
        if (Status s = reader.raw(run, e.rank, lo, hi, raw_head[r]); !s) return s.error();
        continue;
      }
      // Edge buckets raw, whole buckets in between from the bucket table.
      const int64_t b0 = bucket_of(lo, level) + 1, b1 = bucket_of(hi, level) - 1;
      if (Status s = reader.raw(run, e.rank, lo, (b0 << bucket_shift(level)) - 1, raw_head[r]); !s)
        return s.error();
      if (Status s = reader.bucket_points(run, e.rank, level, b0, b1, mid[r], series.source_points);
          !s)
        return s.error();
      if (Status s = reader.raw(run, e.rank, (b1 + 1) << bucket_shift(level), hi, raw_tail[r]); !s)
        return s.error();
    }
    auto feed = [&](const XPoint& p) { dec.add(p.x(q.x), p.value); };
    if (q.aggregate == Aggregate::none || ranks.size() == 1) {
      for (const XPoint& p : raw_head[0]) feed(p);
      for (const BucketRow& b : mid[0]) {
        std::array<XPoint, 4> c = b.p;  // first, min, max, last -> x order
        std::sort(c.begin(), c.end(), [](const XPoint& a, const XPoint& b) { return a.step < b.step; });
        for (const XPoint& p : c) feed(p);
      }
      for (const XPoint& p : raw_tail[0]) feed(p);
    } else {
      for (const XPoint& p : aggregate_raw(raw_head, q.aggregate)) feed(p);
      // Buckets across ranks: combine the ranks' first/min/max/last of the same bucket (an
      // envelope; exact for the min of minima and the max of maxima). x from the rank that
      // decides a min/max, else from the lowest rank.
      std::vector<double> vals;
      merge_by_key(mid, [](const BucketRow& b) { return b.bucket; },
                   [&](const std::vector<const BucketRow*>& at) {
                     std::array<XPoint, 4> c{};
                     for (int j = 0; j < 4; ++j) {
                       vals.clear();
                       for (const BucketRow* b : at) {
                         const XPoint& p = b->p[j];
                         if (vals.empty() || (q.aggregate == Aggregate::max && p.value > c[j].value) ||
                             (q.aggregate == Aggregate::min && p.value < c[j].value))
                           c[j] = p;
                         vals.push_back(p.value);
                       }
                       c[j].value = combine(q.aggregate, vals);
                     }
                     std::sort(c.begin(), c.end(),
                               [](const XPoint& a, const XPoint& b) { return a.step < b.step; });
                     for (const XPoint& p : c) feed(p);
                   });
      for (const XPoint& p : aggregate_raw(raw_tail, q.aggregate)) feed(p);
    }
    for (size_t r = 0; r < ranks.size(); ++r)
      series.source_points += static_cast<int64_t>(raw_head[r].size() + raw_tail[r].size());
    series.points = dec.finish();
    out.push_back(std::move(series));
  }
  return out;
}

namespace {

// A key as one CSV field (RFC 4180): quoted when it holds a comma, quote or line break. Keys
// come from metrics lines anyone can write, and the file is opened in spreadsheets, so a key
// that starts like a formula (= + - @, tab, CR) is quoted and led by an apostrophe: the cell
// shows text instead of evaluating it (OWASP's advice against CSV injection).
std::string csv_field(const std::string& text) {
  const bool formula = !text.empty() && std::string_view("=+-@\t\r").find(text.front()) != std::string_view::npos;
  if (!formula && text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = formula ? "\"'" : "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

}  // namespace

Status RunStore::export_csv(RunId run, std::ostream& out) {
  sql::Stmt exists(db_, "SELECT 1 FROM runs WHERE id = ?1");
  exists.bind(1, run);
  Result<bool> found = exists.step();
  if (!found) return found.error();
  if (!*found) return Error{"run", std::to_string(run), "no such run in the store"};
  exists.reset();
  // Key by key (id order), each in (rank, step) order: range scans of primary keys, no sort of
  // millions of rows. A step series is a column of the step rows; other keys are metrics_extra.
  sql::Stmt keys(db_, "SELECT id, name, coalesce(col, -1) FROM keys ORDER BY id");
  Result<std::vector<std::tuple<int64_t, std::string, int>>> all = keys.collect([&] {
    int col = static_cast<int>(keys.int64(2));
    if (col >= static_cast<int>(value_columns().size())) col = -1;
    return std::tuple<int64_t, std::string, int>(keys.int64(0), keys.text(1), col);
  });
  if (!all) return all.error();
  out << "run,rank,step,time,tokens,key,value\n";
  char buf[64];
  auto num = [&](double v) -> std::string_view {  // shortest text that reads back exactly
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string_view(buf, static_cast<size_t>(r.ptr - buf));
  };
  const std::string run_text = std::to_string(run);
  for (const auto& [id, name, col] : *all) {
    const std::string field = csv_field(name);
    sql::Stmt q(db_, col >= 0
                         ? "SELECT rank, step, time, tokens, " + value_columns()[static_cast<size_t>(col)] +
                               " FROM steps WHERE run = ?1 AND (present >> " + std::to_string(col) +
                               ") & 1 ORDER BY rank, step"
                         : std::string("SELECT m.rank, m.step, s.time, s.tokens, m.value"
                                       " FROM metrics_extra m LEFT JOIN steps s ON s.run = m.run"
                                       " AND s.rank = m.rank AND s.step = m.step"
                                       " WHERE m.run = ?1 AND m.key = ?2 ORDER BY m.rank, m.step"));
    q.bind(1, run);
    if (col < 0) q.bind(2, id);
    Status rows = q.each_row([&] {
      out << run_text << ',' << q.int64(0) << ',' << q.int64(1) << ',';
      if (!q.is_null(2)) out << num(q.real(2));
      out << ',';
      if (!q.is_null(3)) out << num(q.real(3));
      out << ',' << field << ',';
      if (!q.is_null(4)) out << num(q.real(4));
      out << '\n';
    });
    if (!rows) return rows;
  }
  if (!out) return Error{"--csv", "", "writing the CSV failed"}.as(ErrorKind::io);
  return Status::Ok();
}

Status RunStore::export_csv(RunId run, const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error{"--csv", path.string(), "cannot be written"}.as(ErrorKind::io);
  if (Status s = export_csv(run, static_cast<std::ostream&>(out)); !s) return s;
  out.close();
  if (!out) return Error{"--csv", path.string(), "writing failed (disk full?)"}.as(ErrorKind::io);
  return Status::Ok();
}

}  // namespace meshwork::store
