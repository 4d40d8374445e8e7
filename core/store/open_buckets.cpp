#include "core/store/open_buckets.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/store/schema.h"

namespace meshwork::store {

namespace {
const char* const kReplace = R"sql(
INSERT OR REPLACE INTO buckets(run, key, rank, level, bucket, n,
  f_step, f_time, f_tok, f_v, lo_step, lo_time, lo_tok, lo_v,
  hi_step, hi_time, hi_tok, hi_v, la_step, la_time, la_tok, la_v)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
        ?19, ?20, ?21, ?22)
)sql";

// A level-k bucket b holds level-(k-1) buckets 8b .. 8b+7 (shifts 3k+1 and 3k-2 differ by 3).
constexpr int kChildren = 8;

std::string raw_sql() {
  std::string cols;
  for (const std::string& c : value_columns()) cols += ", " + c;
  return "SELECT step, time, tokens, present" + cols +
         " FROM steps WHERE run = ?1 AND rank = ?2 AND step BETWEEN ?3 AND ?4";
}
}  // namespace

void merge_bucket(BucketAgg& into, const BucketAgg& from) {
  if (from.n == 0) return;
  if (into.n == 0) {
    into = from;
    return;
  }
  into.n += from.n;
  if (from.first.step < into.first.step) into.first = from.first;
  if (from.last.step >= into.last.step) into.last = from.last;
  if (from.min.value < into.min.value) into.min = from.min;
  if (from.max.value > into.max.value) into.max = from.max;
}

OpenBucketWriter::OpenBucketWriter(sqlite3* db)
    : db_(db),
      replace_(db, kReplace),
      raw_(db, raw_sql()) {}

Status OpenBucketWriter::prepared() const {
  for (const sql::Stmt* s : {&replace_, &raw_})
    if (!s->ok()) return s->error();
  return Status::Ok();
}

void OpenBucketWriter::close(int64_t run, int rank, const OpenBucket& open, int64_t next) {
  queue_.push_back(Queued{run, rank, open.bucket, next, open.partial, open.agg});
}

void OpenBucketWriter::flush_open(int64_t run, int rank, OpenBucket& open) {
  if (open.bucket == INT64_MIN || !open.dirty) return;
  open.dirty = false;
  queue_.push_back(Queued{run, rank, open.bucket, INT64_MAX, open.partial, open.agg});
}

// After a restart or rollback the open bucket's earlier points are only in `steps`: read its
// <= 16 step rows (every series at once) and summarise them as add() would have.
Status OpenBucketWriter::recompute_from_steps(Queued& q) {
  for (BucketAgg& a : q.agg) a = BucketAgg{};
  const int64_t s0 = q.bucket << bucket_shift(1), s1 = s0 + bucket_steps(1) - 1;
  raw_.bind(1, q.run).bind(2, q.rank).bind(3, s0).bind(4, s1);
  return raw_.each_row([&] {
    const BucketPoint base{raw_.int64(0), raw_.real(1), raw_.real(2), 0};
    const int64_t present = raw_.int64(3);
    for (size_t i = 0; i < kStepSeries; ++i) {
      const int col = 4 + static_cast<int>(i);
      if (!((present >> i) & 1) || raw_.is_null(col)) continue;
      BucketPoint p = base;
      p.value = raw_.real(col);
      if (std::isnan(p.value)) continue;
      q.agg[i].add(p);
    }
  });
}

Status OpenBucketWriter::write_row(int64_t run, int64_t key, int rank, int level, int64_t bucket,
                                   const BucketAgg& a) {
  if (a.n == 0) return Status::Ok();  // no point (or only NaN): no row, as BucketWriter
  replace_.bind(1, run).bind(2, key).bind(3, rank).bind(4, level).bind(5, bucket).bind(6, a.n);
  int i = 7;
  for (const BucketPoint* p : {&a.first, &a.min, &a.max, &a.last}) {
    replace_.bind(i, p->step).bind(i + 1, p->time).bind(i + 2, p->tokens).bind(i + 3, p->value);
    i += 4;
  }
  return replace_.run();
}

// The children of one rank's bucket, for all 15 series in one statement: `key IN (...)` makes
// SQLite seek each key's (rank, level, bucket) range (15 seeks, one statement instead of 15).
Status OpenBucketWriter::merge_children(int64_t run, int rank, int level, int64_t b0, int64_t b1,
                                        std::array<BucketAgg, kStepSeries>& out) {
  if (!children_.ok()) {
    std::string in;
    for (int64_t k : keys_) in += (in.empty() ? "" : ",") + std::to_string(k);
    children_ = sql::Stmt(db_, "SELECT key, n, f_step, f_time, f_tok, f_v, lo_step, lo_time, lo_tok, lo_v,"
                               " hi_step, hi_time, hi_tok, hi_v, la_step, la_time, la_tok, la_v FROM buckets"
                               " WHERE run = ?1 AND key IN (" + in + ") AND rank = ?2 AND level = ?3"
                               " AND bucket BETWEEN ?4 AND ?5");
    if (!children_.ok()) return children_.error();
  }
  children_.bind(1, run).bind(2, rank).bind(3, level).bind(4, b0).bind(5, b1);
  return children_.each_row([&] {
    auto point = [&](int c) {
      return BucketPoint{children_.int64(c), children_.real(c + 1), children_.real(c + 2),
                         children_.real(c + 3)};
    };
    const auto at = std::find(keys_.begin(), keys_.end(), children_.int64(0));
    if (at == keys_.end()) return;
    BucketAgg child;
    child.n = children_.int64(1);
    child.first = point(2);
    child.min = point(6);
    child.max = point(10);
    child.last = point(14);
    merge_bucket(out[static_cast<size_t>(at - keys_.begin())], child);
  });
}

Status OpenBucketWriter::write_level1() {
  if (keys_.size() != kStepSeries && !queue_.empty())
    return Error{"buckets", std::to_string(keys_.size()), "the step series' key ids are not known"}
        .as(ErrorKind::internal);
  for (Queued& q : queue_) {
    if (q.partial)
      if (Status s = recompute_from_steps(q); !s) return s;
    for (size_t i = 0; i < kStepSeries; ++i)
      if (Status s = write_row(q.run, keys_[i], q.rank, 1, q.bucket, q.agg[i]); !s) return s;
  }
  return Status::Ok();
}

Status OpenBucketWriter::write_parents() {
  // Coarser levels close when the level-1 bucket index, shifted to their width, changes; a
  // flush writes them all. Level by level, so each level's children are already written.
  std::sort(queue_.begin(), queue_.end(), [](const Queued& a, const Queued& b) {
    return std::tie(a.run, a.rank, a.bucket) < std::tie(b.run, b.rank, b.bucket);
  });
  for (int level = 2; level <= kBucketLevels + 1; ++level) {  // kBucketLevels + 1 stands for 0
    for (const Queued& q : queue_) {
      const bool flush = q.next == INT64_MAX;
      int64_t b = 0, b0 = 0, b1 = 0;
      int child_level = level - 1, out_level = level;
      if (level <= kBucketLevels) {
        const int shift = 3 * (level - 1);  // level-1 index -> level-k index
        b = q.bucket >> shift;
        if (!flush && (q.next >> shift) == b) continue;  // still open at this level
        b0 = b * kChildren;
        b1 = b0 + kChildren - 1;
      } else {
        if (!flush) continue;  // level 0 (the whole series) is written by flushes only
        out_level = 0;
        child_level = kBucketLevels;
        b0 = INT64_MIN;
        b1 = INT64_MAX;
      }
      std::array<BucketAgg, kStepSeries> agg{};
      if (Status s = merge_children(q.run, q.rank, child_level, b0, b1, agg); !s) return s;
      for (size_t i = 0; i < kStepSeries; ++i)
        if (Status s = write_row(q.run, keys_[i], q.rank, out_level, b, agg[i]); !s) return s;
    }
  }
  queue_.clear();
  return Status::Ok();
}

}  // namespace meshwork::store
