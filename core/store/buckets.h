// Chart buckets (internal): per series (run, key, rank) and level, the first, min, max and last
// point of each bucket of steps, with the three x values of each point. Level 0 is one bucket per
// series (the run summary); level k >= 1 groups 16 * 8^(k-1) steps (16, 128, 1024, 8192,
// 65536): 2^(4 + 3(k-1)) = 2^(3k+1), so bucket = step >> (3k + 1) (floor, also for negative
// steps). Ingest cost: one bucket row per 16 + 128 + ... points ~ 7% more rows than the points.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <unordered_map>

#include <sqlite3.h>

#include "core/error.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

inline constexpr int kBucketLevels = 5;  // levels 1..5
inline constexpr int bucket_shift(int level) { return level == 0 ? 63 : 3 * level + 1; }
inline constexpr int64_t bucket_steps(int level) { return int64_t{1} << bucket_shift(level); }
inline int64_t bucket_of(int64_t step, int level) {
  return level == 0 ? 0 : (step >> bucket_shift(level));
}

struct BucketPoint {
  int64_t step = 0;
  double time = 0, tokens = 0, value = 0;
};

struct BucketAgg {
  int64_t n = 0;
  BucketPoint first, min, max, last;
  void add(const BucketPoint& p) {
    if (n++ == 0) {
      first = min = max = last = p;
      return;
    }
    if (p.step < first.step) first = p;
    if (p.step >= last.step) last = p;
    if (p.value < min.value) min = p;
    if (p.value > max.value) max = p;
  }
};

struct BucketKey {
  int64_t run, key;
  int rank, level;
  int64_t bucket;
  bool operator==(const BucketKey&) const = default;
};
struct BucketKeyHash {
  size_t operator()(const BucketKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.run) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.key) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.rank) * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.level) + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.bucket) * 0x165667B19E3779F9ull + (h << 6) + (h >> 2);
    return h;
  }
};

// Collects new points during one transaction and merges them into the buckets table at the end
// (one upsert per touched bucket, min/max/first/last merged in SQL).
class BucketWriter {
 public:
  explicit BucketWriter(sqlite3* db);
  bool ok() const { return upsert_.ok(); }
  void add(int64_t run, int64_t key, int rank, const BucketPoint& p) {
    if (std::isnan(p.value)) return;  // NaN has no place on a min/max chart
    // Points of a series come in step order, so they usually land in the buckets of the series'
    // previous point: a small direct-mapped cache of those saves the hash lookups.
    Recent& r = recent_[(static_cast<uint64_t>(key) * 31 + static_cast<uint64_t>(rank)) % kRecent];
    if (!(r.valid && r.run == run && r.key == key && r.rank == rank)) {
      r = Recent{true, run, key, rank, {}, {}};
      r.bucket.fill(INT64_MIN);
    }
    for (int level = 0; level <= kBucketLevels; ++level) {
      const int64_t b = bucket_of(p.step, level);
      if (r.bucket[level] != b) {
        r.bucket[level] = b;
        r.agg[level] = &pending_[BucketKey{run, key, rank, level, b}];
      }
      r.agg[level]->add(p);
    }
  }
  Status flush();  // writes and clears the pending buckets
  void clear() {
    pending_.clear();
    for (Recent& r : recent_) r.valid = false;
  }

 private:
  static constexpr size_t kRecent = 256;
  struct Recent {
    bool valid = false;
    int64_t run = 0, key = 0;
    int rank = 0;
    std::array<int64_t, kBucketLevels + 1> bucket{};
    std::array<BucketAgg*, kBucketLevels + 1> agg{};  // unordered_map nodes do not move
  };
  sql::Stmt upsert_;
  std::unordered_map<BucketKey, BucketAgg, BucketKeyHash> pending_;
  std::array<Recent, kRecent> recent_{};
};

}  // namespace meshwork::store
