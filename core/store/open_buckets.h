// Chart buckets written when they close (internal). See buckets.h for the levels.
//
// Before, every transaction upserted each touched bucket of every level of every series: fed as
// the follower feeds it (one chunk per rank per step, thousands of ranks per batch), a batch of
// 8,192 ranks' lines rewrote 8,192 x 15 keys x 6 levels rows, and that was 79 % of ingest.
// Now each rank keeps its open level-1 bucket (16 steps) of its step series in memory:
//  - a point in the open bucket is added in memory (no SQL);
//  - a point beyond it closes it: the level-1 rows are written once (INSERT OR REPLACE), and
//    every coarser bucket that closed with it (level k closes when step >> (3k+1) changes) is
//    computed from its <= 8 children of level k-1, already in the table (children first);
//  - a late point, before the open bucket (out of order), is merged into the closed rows of every
//    level by the old upsert (BucketWriter), after the closed level-1 rows are written;
//  - when a rank ends, on an import's end, and when the writer stops, the open buckets are
//    written as they are (levels 1..5, and level 0 = the merge of the series' level-5 rows) and
//    kept open: a later close rewrites them whole.
// Queries never read an open bucket: the bucket holding a rank's last stored step is always read
// as raw points (series_query.cpp reads the edge buckets of a range raw), so data of the open
// bucket is visible to every reader as soon as its step row commits, with no merge of writer
// memory. After a restart or a rollback the memory is gone: the open bucket of a rank with
// stored steps is marked partial and recomputed from its raw step rows (<= 16) when it closes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <sqlite3.h>

#include "core/error.h"
#include "core/store/buckets.h"
#include "core/store/sqlite.h"
#include "core/store/step_line.h"

namespace meshwork::store {

// One rank's open level-1 bucket of its step series (step_series_keys() order).
struct OpenBucket {
  int64_t bucket = INT64_MIN;  // level-1 bucket index; INT64_MIN: none yet
  bool partial = false;        // points before this process's memory may be in it (recompute)
  bool dirty = false;          // points added since it was last written
  std::array<BucketAgg, kStepSeries> agg{};
};

// Merges two summaries of the same bucket (first = lower step, last = higher step, the lower min,
// the higher max; n adds up).
void merge_bucket(BucketAgg& into, const BucketAgg& from);

class OpenBucketWriter {
 public:
  explicit OpenBucketWriter(sqlite3* db);
  Status prepared() const;
  // `key_ids`: the ids of step_series_keys(), by index.
  void set_keys(const std::vector<int64_t>& key_ids) {
    if (key_ids != keys_) children_ = sql::Stmt();  // prepared with the ids inlined
    keys_ = key_ids;
  }

  // The rank's open bucket closed because a point of bucket `next` arrived: queue its rows.
  void close(int64_t run, int rank, const OpenBucket& open, int64_t next);
  // Writes the open bucket as it is now, with its coarser levels and level 0 (it stays open).
  // No-op when nothing was added since the last write. Clears `open.dirty`.
  void flush_open(int64_t run, int rank, OpenBucket& open);
  bool has_pending() const { return !queue_.empty(); }

  // In the transaction's end, in this order: level-1 rows (before the late upserts merge into
  // them), then the caller's BucketWriter::flush(), then write_parents().
  Status write_level1();
  Status write_parents();
  void clear() { queue_.clear(); }

 private:
  struct Queued {
    int64_t run;
    int rank;
    int64_t bucket;  // level 1
    int64_t next;    // the level-1 bucket that closed it; INT64_MAX: a flush of an open bucket
    bool partial;
    std::array<BucketAgg, kStepSeries> agg;
  };
  Status recompute_from_steps(Queued& q);
  Status write_row(int64_t run, int64_t key, int rank, int level, int64_t bucket, const BucketAgg& a);
  Status merge_children(int64_t run, int rank, int level, int64_t b0, int64_t b1,
                        std::array<BucketAgg, kStepSeries>& out);

  sqlite3* db_;
  std::vector<int64_t> keys_;
  std::vector<Queued> queue_;
  sql::Stmt replace_, raw_;
  sql::Stmt children_;  // prepared on first use, once the key ids are known
};

}  // namespace meshwork::store
