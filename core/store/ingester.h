// Ingester (internal): turns metrics JSON lines (core/metrics.h, version 1) into rows, inside a
// transaction opened by RunStore. It keeps its prepared statements and small caches (metric key
// ids, each rank's last step and running token count) between calls; the caches are dropped when
// a transaction fails so a rollback can never leave them ahead of the database.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sqlite3.h>

#include "core/metrics.h"
#include "core/store/buckets.h"
#include "core/store/open_buckets.h"
#include "core/store/rank_agg.h"
#include "core/store/run_store.h"
#include "core/store/sqlite.h"
#include "core/store/step_line.h"

namespace meshwork::store {

class Ingester {
 public:
  explicit Ingester(sqlite3* db);
  Status prepared() const;

  // Call inside an open transaction. `at_eof`: a final line without '\n' is consumed too.
  Result<IngestCounts> ingest(RunId run, std::string_view source, uint64_t start_offset,
                              std::string_view bytes, bool at_eof);
  // Writes the chart buckets that closed and the cross-rank aggregates of everything ingested
  // since the last call (same transaction).
  Status finish();
  // Queues the open chart buckets of `run`'s ranks (every run when unset) for the next finish():
  // a rank ended, an import is complete, the writer stops (open_buckets.h).
  void flush_open(std::optional<RunId> run);
  bool has_open(std::optional<RunId> run) const {
    for (const auto& [id, state] : ranks_)
      if ((!run || id.first == *run) && state.open.dirty) return true;
    return false;
  }
  // After a rollback: forget everything cached.
  void forget();
  // Ends a batch: finish(), then commits `tx`. When either fails, forgets everything cached (the
  // transaction rolls back as it goes out of scope) and returns the error.
  Status finish_and_commit(sql::Transaction& tx);

  Result<int64_t> key_id(std::string_view name);  // creates the key when new

  // Another tool's steps (an event file, trainer_state.json: core/interop/foreign_import.h) as
  // rank 0's, and the source's offset set to `offset` (inside the caller's transaction).
  Result<IngestCounts> ingest_foreign(RunId run, std::string_view source, uint64_t offset,
                                      const std::vector<ForeignStep>& steps);

  // For rebuild_derived(): feeds a stored point into the buckets.
  void add_bucket_point(RunId run, int64_t key, int rank, const BucketPoint& p) {
    buckets_.add(run, key, rank, p);
  }
  void add_agg_point(RunId run, int64_t key, int rank, const BucketPoint& p) {
    aggs_.add(run, key, rank, p.step, p.value, p.time, p.tokens);
  }

 private:
  struct RankState {
    int64_t last_step = INT64_MIN;  // highest step stored for the rank
    double tokens = 0;              // cumulative tokens at last_step
    OpenBucket open;                // its open level-1 chart bucket (open_buckets.h)
  };
  Status on_start(RunId run, const StartRecord& r);
  Status on_step(RunId run, const StepRecord& r, IngestCounts& counts);
  Status store_step(RunId run, int rank, int64_t step, double time, double step_tokens,
                    const std::array<double, kStepSeries>& values, int64_t present, IngestCounts& counts);
  Status foreign_step(RunId run, const ForeignStep& f, IngestCounts& counts);
  Status store_expert_load(RunId run, int64_t step, const MoeStepMetrics& moe);
  Status open_source(RunId run, std::string_view source);
  Result<int64_t> fill_missing_series(RunId run, int rank, int64_t step, const std::array<double, kStepSeries>& values,
                                      int64_t present, BucketPoint& p, IngestCounts& counts);
  Status on_eval(RunId run, const EvalRecord& r, IngestCounts& counts);
  Status on_end(RunId run, const EndRecord& r);
  Result<RankState*> rank_state(RunId run, int rank);
  Status series_keys();
  Status store_pending_steps(RunId run, IngestCounts& counts);  // see ingester.cpp  // fills series_key_ids_ (creating the keys when new)
  Status malformed_event(RunId run, std::string_view source, uint64_t offset,
                         const Error& error, int64_t seen_before);

  sqlite3* db_;
  sql::Stmt run_exists_, source_get_, source_new_, source_put_;
  sql::Stmt step_new_, step_prev_, step_last_;
  sql::Stmt key_new_, key_get_, extra_new_, event_;
  sql::Stmt rank_start_, run_running_, run_world_, run_config_;
  sql::Stmt rank_end_, rank_status_, ranks_ok_, run_failed_, run_stopped_, run_ok_;
  sql::Stmt moe_step_new_, moe_layer_new_;
  BucketWriter buckets_;         // late points and keys outside the step series
  OpenBucketWriter open_buckets_;
  RankAggWriter aggs_;
  std::unordered_map<std::string, int64_t> key_ids_;
  std::vector<int64_t> series_key_ids_;  // ids of step_series_keys(), by index
  std::map<std::pair<RunId, int>, RankState> ranks_;
  std::vector<StepRecord> pending_steps_;  // step lines of the chunk not stored yet
};

}  // namespace meshwork::store
