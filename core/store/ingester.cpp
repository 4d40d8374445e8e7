#include "core/store/ingester.h"

#include <algorithm>
#include <cmath>

#include <cmath>
#include <variant>

#include "core/store/calibration_store.h"
#include "core/store/expert_load.h"
#include "core/store/schema.h"
#include "core/store/step_line.h"

namespace meshwork::store {

namespace {
constexpr int64_t kMaxLoggedBadLines = 20;  // per source: warning events for the first few only

// The parser reports a line that is valid JSON but of another version or type with these words
// (core/metrics.cpp); everything else is malformed.
bool is_unknown_kind(const Error& e) {
  return e.allowed.rfind("unknown type", 0) == 0 || e.allowed.rfind("needs \"v\":1", 0) == 0;
}

// The step row with its values (schema.cpp, version 3): ?1 run, ?2 rank, ?3 step, ?4 time,
// ?5 tokens, ?6 present (a bit per series), ?7.. the values in step_series_keys() order.
std::string step_insert() {
  std::string cols, params;
  int i = 7;
  for (const std::string& c : value_columns()) {
    cols += ", " + c;
    params += ",?" + std::to_string(i++);
  }
  return "INSERT OR IGNORE INTO steps(run, rank, step, time, tokens, present" + cols +
         ") VALUES (?1,?2,?3,?4,?5,?6" + params + ")";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}
}  // namespace

Ingester::Ingester(sqlite3* db)
    : db_(db),
      run_exists_(db, "SELECT 1 FROM runs WHERE id = ?1"),
      source_get_(db, "SELECT offset, malformed + unknown FROM sources WHERE run = ?1 AND name = ?2"),
      source_new_(db, "INSERT OR IGNORE INTO sources(run, name) VALUES (?1, ?2)"),
      source_put_(db,
                  "UPDATE sources SET offset = ?3, lines = lines + ?4, malformed = malformed + ?5,"
                  " unknown = unknown + ?6 WHERE run = ?1 AND name = ?2"),
      step_new_(db, step_insert()),
      step_prev_(db,
                 "SELECT tokens FROM steps WHERE run = ?1 AND rank = ?2 AND step < ?3"
                 " ORDER BY step DESC LIMIT 1"),
      step_last_(db,
                 "SELECT step, tokens FROM steps WHERE run = ?1 AND rank = ?2"
                 " ORDER BY step DESC LIMIT 1"),
      key_new_(db, "INSERT OR IGNORE INTO keys(name) VALUES (?1)"),
      key_get_(db, "SELECT id FROM keys WHERE name = ?1"),
      extra_new_(db, "INSERT OR IGNORE INTO metrics_extra(run, key, rank, step, value) VALUES (?1,?2,?3,?4,?5)"),
      event_(db, "INSERT INTO events(run, time, level, text) VALUES (?1, ?2, ?3, ?4)"),
      rank_start_(db,
                  "INSERT INTO ranks(run, rank, node, host, pid, started) VALUES (?1,?2,?3,?4,?5,?6)"
                  " ON CONFLICT(run, rank) DO UPDATE SET node = excluded.node,"
                  " host = excluded.host, pid = excluded.pid, started = excluded.started"),
      run_running_(db, "UPDATE runs SET status = 'running' WHERE id = ?1 AND status = 'created'"),
      run_world_(db, "UPDATE runs SET world = ?2 WHERE id = ?1 AND world = 0"),
      run_config_(db, "UPDATE runs SET config = ?2 WHERE id = ?1 AND config = '{}'"),
      rank_end_(db,
                "INSERT INTO ranks(run, rank, status, reason, ended) VALUES (?1,?2,?3,?4,?5)"
                " ON CONFLICT(run, rank) DO UPDATE SET status = excluded.status,"
                " reason = excluded.reason, ended = excluded.ended"),
      rank_status_(db, "SELECT status FROM ranks WHERE run = ?1 AND rank = ?2"),
      ranks_ok_(db,
                "INSERT INTO run_stats(run, ranks_ok) VALUES (?1, ?2) ON CONFLICT(run)"
                " DO UPDATE SET ranks_ok = ranks_ok + excluded.ranks_ok"),
      run_failed_(db,
                  "UPDATE runs SET status = 'failed', exit_reason = ?2, ended = ?3"
                  " WHERE id = ?1 AND status <> 'failed'"),
      run_stopped_(db,
                   "UPDATE runs SET status = 'stopped', exit_reason = ?2, ended = ?3"
                   " WHERE id = ?1 AND status IN ('created', 'running')"),
      run_ok_(db,
              "UPDATE runs SET status = 'ok', ended = ?2 WHERE id = ?1"
              " AND status IN ('created', 'running') AND world > 0"
              " AND (SELECT ranks_ok FROM run_stats WHERE run = ?1) >= world"),
      moe_step_new_(db, "INSERT OR IGNORE INTO moe_steps(run, step, aux_loss) VALUES (?1, ?2, ?3)"),
      moe_layer_new_(db,
                     "INSERT OR IGNORE INTO expert_load(run, layer, step, experts, tokens)"
                     " VALUES (?1, ?2, ?3, ?4, ?5)"),
      buckets_(db),
      open_buckets_(db),
      aggs_(db) {}

Status Ingester::prepared() const {
  for (const sql::Stmt* s :
       {&run_exists_, &source_get_, &source_new_, &source_put_, &step_new_, &step_prev_, &step_last_, &key_new_, &extra_new_, &key_get_, &event_, &rank_start_, &run_running_,
        &run_world_, &run_config_, &rank_end_, &rank_status_, &ranks_ok_, &run_failed_, &run_stopped_, &run_ok_,
        &moe_step_new_, &moe_layer_new_})
    if (!s->ok()) return s->error();
  if (!buckets_.ok()) return Error{"database", "buckets", "cannot prepare the bucket upsert"}.as(ErrorKind::io);
  if (!aggs_.ok()) return Error{"database", "rank_agg", "cannot prepare the aggregate upsert"}.as(ErrorKind::io);
  if (Status s = open_buckets_.prepared(); !s) return s;
  if (step_series_keys().size() != kStepSeries || value_columns().size() != kStepSeries)
    return Error{"metrics keys", std::to_string(step_series_keys().size()),
                 "the store's step fast path expects " + std::to_string(kStepSeries)}.as(ErrorKind::internal);
  return Status::Ok();
}

void Ingester::forget() {
  pending_steps_.clear();
  key_ids_.clear();
  series_key_ids_.clear();
  ranks_.clear();
  buckets_.clear();
  open_buckets_.clear();
  aggs_.clear();
}

Status Ingester::finish_and_commit(sql::Transaction& tx) {
  Status s = finish();
  if (s) s = tx.commit();
  if (!s) forget();
  return s;
}

Result<int64_t> Ingester::key_id(std::string_view name) {
  if (auto it = key_ids_.find(std::string(name)); it != key_ids_.end()) return it->second;
  if (Status s = key_new_.bind(1, name).run(); !s) return s.error();
  key_get_.bind(1, name);
  Result<bool> row = key_get_.step();
  if (!row) return row.error();
  if (!*row) return Error{"database", std::string(name), "metric key vanished"}.as(ErrorKind::io);
  const int64_t id = key_get_.int64(0);
  key_get_.reset();
  key_ids_.emplace(std::string(name), id);
  return id;
}

Status Ingester::series_keys() {
  if (!series_key_ids_.empty()) return Status::Ok();
  for (const std::string& k : step_series_keys()) {
    Result<int64_t> id = key_id(k);
    if (!id) {
      series_key_ids_.clear();
      return id.error();
    }
    series_key_ids_.push_back(*id);
  }
  open_buckets_.set_keys(series_key_ids_);
  return Status::Ok();
}

Result<Ingester::RankState*> Ingester::rank_state(RunId run, int rank) {
  auto [it, inserted] = ranks_.try_emplace({run, rank});
  if (inserted) {
    step_last_.bind(1, run).bind(2, rank);
    Result<bool> row = step_last_.step();
    if (!row) {
      ranks_.erase(it);
      return row.error();
    }
    if (*row) {
      it->second.last_step = step_last_.int64(0);
      it->second.tokens = step_last_.real(1);
      step_last_.reset();
      // Its open bucket's earlier points are in `steps` only (a restart, a rollback).
      it->second.open.bucket = bucket_of(it->second.last_step, 1);
      it->second.open.partial = true;
      it->second.open.dirty = true;  // it may never have been written (a crash)
    }
  }
  return &it->second;
}

Status Ingester::on_step(RunId run, const StepRecord& r, IngestCounts& counts) {
  // Every series of the record, but comm_s.pp only when the line had it: meshtrain writes it for
  // pipelined runs alone (it is never exactly 0 there), so other runs have no pp series at all.
  // The same for comm_s.ep, written by expert-parallel runs alone.
  int64_t present = (int64_t{1} << kStepSeries) - 1;
  if (r.comm_s[Axis::pp] == 0) present &= ~(int64_t{1} << kCommPpSeries);
  if (r.comm_ep_s == 0) present &= ~(int64_t{1} << kCommEpSeries);
  if (r.moe)
    if (Status s = store_expert_load(run, r.step, *r.moe); !s) return s;
  if (!r.cpu_s) present &= ~(int64_t{1} << kCpuSeries);
  return store_step(run, r.rank, r.step, r.time, static_cast<double>(r.tokens), step_values(r), present, counts);
}

// A step's routing, stored once for the run: every rank's record carries the same counts over
// the global batch (docs/metrics.md), so the first rank's record to arrive is stored and the
// others' (and a re-ingest) are ignored by the primary keys, as points are.
Status Ingester::store_expert_load(RunId run, int64_t step, const MoeStepMetrics& moe) {
  if (Status s = moe_step_new_.bind(1, run).bind(2, step).bind(3, moe.aux_loss).run(); !s) return s;
  if (sqlite3_changes(db_) != 1) return Status::Ok();  // stored already
  for (const ExpertLoad& l : moe.layers) {
    const std::string blob = pack_expert_tokens(l.tokens);
    moe_layer_new_.bind(1, run).bind(2, l.layer).bind(3, step).bind(4, static_cast<int64_t>(l.tokens.size()));
    sqlite3_bind_blob(moe_layer_new_.raw(), 5, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    if (Status s = moe_layer_new_.run(); !s) return s;
  }
  return Status::Ok();
}

// One row of `steps` and its points: `values` in step_series_keys() order; `present` a bit per
// series (a NaN value is stored NULL and left out of aggregates and buckets either way).
Status Ingester::store_step(RunId run, int rank, int64_t step, double time, double step_tokens,
                            const std::array<double, kStepSeries>& values, int64_t present,
                            IngestCounts& counts) {
  if (Status s = series_keys(); !s) return s;
  Result<RankState*> state = rank_state(run, rank);
  if (!state) return state.error();
  RankState& rs = **state;
  StepRecord r;  // the fields the row code below reads
  r.rank = rank;
  r.step = step;
  r.time = time;
  BucketPoint p{r.step, r.time, 0, 0};
  const bool in_order = r.step > rs.last_step;
  if (in_order) {
    // Steps normally arrive in order: tokens so far = tokens at the previous step + this step's.
    p.tokens = rs.tokens + step_tokens;
  } else {
    // A re-ingest (the row exists: the insert below is ignored, the first stored values win) or
    // a late step filling a hole (tokens = stored tokens before it + its own; later steps are not
    // shifted).
    step_prev_.bind(1, run).bind(2, r.rank).bind(3, r.step);
    Result<bool> prev = step_prev_.step();
    if (!prev) return prev.error();
    double before = 0;
    if (*prev) {
      before = step_prev_.real(0);
      step_prev_.reset();
    }
    p.tokens = before + step_tokens;
  }
  step_new_.bind(1, run).bind(2, r.rank).bind(3, r.step).bind(4, r.time).bind(5, p.tokens)
      .bind(6, present);
  for (size_t i = 0; i < kStepSeries; ++i) {
    const int col = 7 + static_cast<int>(i);
    if (std::isnan(values[i]) || !((present >> i) & 1)) step_new_.bind_null(col);
    else step_new_.bind(col, values[i]);
  }
  if (Status s = step_new_.run(); !s) return s;
  if (sqlite3_changes(db_) != 1) {  // the step is stored already
    const int64_t full = (int64_t{1} << kStepSeries) - 1;
    if (present == full) {  // a meshtrain step record: stored whole the first time
      counts.duplicates += static_cast<int64_t>(kStepSeries);
      return Status::Ok();
    }
    // Another tool logs a step's series one record at a time, and an import can end between
    // them: the series the stored row lacks are filled in, the ones it has stay (exactly once).
    Result<int64_t> added = fill_missing_series(run, r.rank, r.step, values, present, p, counts);
    if (!added) return added.error();
    if (*added == 0) return Status::Ok();
    present = *added;
  } else if (in_order) {
    rs.last_step = r.step;
    rs.tokens = p.tokens;
  }
  counts.points += static_cast<int64_t>(__builtin_popcountll(static_cast<uint64_t>(present)));
  for (size_t i = 0; i < kStepSeries; ++i)
    if (!std::isnan(values[i]) && ((present >> i) & 1))
      aggs_.add(run, series_key_ids_[i], r.rank, r.step, values[i], p.time, p.tokens);
  // Chart buckets: the open one in memory, a later one closes it, an earlier one is a late point.
  OpenBucket& open = rs.open;
  const int64_t b = bucket_of(r.step, 1);
  if (open.bucket == INT64_MIN) open.bucket = b;
  if (b > open.bucket) {
    open_buckets_.close(run, r.rank, open, b);
    open = OpenBucket{b, false, false, {}};
  }
  open.dirty = true;
  for (size_t i = 0; i < kStepSeries; ++i) {
    if (std::isnan(values[i]) || !((present >> i) & 1)) continue;
    p.value = values[i];
    if (b == open.bucket) open.agg[i].add(p);
    else buckets_.add(run, series_key_ids_[i], r.rank, p);
  }
  return Status::Ok();
}

// The row at (run, rank, step) exists: sets the series of `present` it does not hold yet.
// Returns those series' bits (their points are then aggregated like new ones); `p` gets the
// row's time and cumulative tokens.
Result<int64_t> Ingester::fill_missing_series(RunId run, int rank, int64_t step,
                                              const std::array<double, kStepSeries>& values, int64_t present,
                                              BucketPoint& p, IngestCounts& counts) {
  sql::Stmt row(db_, "SELECT present, time, tokens FROM steps WHERE run = ?1 AND rank = ?2 AND step = ?3");
  row.bind(1, run).bind(2, rank).bind(3, step);
  Result<bool> found = row.step();
  if (!found) return found.error();
  if (!*found) return int64_t{0};
  const int64_t stored = row.int64(0);
  p.time = row.real(1);
  p.tokens = row.real(2);
  row.reset();
  const int64_t added = present & ~stored;
  counts.duplicates += __builtin_popcountll(static_cast<uint64_t>(present & stored));
  for (size_t i = 0; i < kStepSeries; ++i) {
    if (!((added >> i) & 1)) continue;
    sql::Stmt set(db_, "UPDATE steps SET " + value_columns()[i] + " = ?4, present = present | ?5"
                       " WHERE run = ?1 AND rank = ?2 AND step = ?3");
    set.bind(1, run).bind(2, rank).bind(3, step).bind(5, int64_t{1} << i);
    if (std::isnan(values[i])) set.bind_null(4);
    else set.bind(4, values[i]);
    if (Status s = set.run(); !s) return s.error();
  }
  return added;
}

// Another tool's step (core/interop/foreign_import.h): Meshwork's series where the tool logged
// them, absent elsewhere; its own series as metrics_extra points at the same step.
Status Ingester::foreign_step(RunId run, const ForeignStep& f, IngestCounts& counts) {
  std::array<double, kStepSeries> values;
  values.fill(std::nan(""));
  int64_t present = 0;
  const std::vector<std::string>& keys = step_series_keys();
  std::vector<std::pair<std::string, double>> extras;
  double tokens = 0;
  for (const auto& [key, value] : f.values) {
    auto it = std::find(keys.begin(), keys.end(), key);
    if (key == "tokens") tokens = value;  // this step's, as meshtrain's records count them
    if (it == keys.end()) {
      extras.emplace_back(key, value);
      continue;
    }
    const size_t i = static_cast<size_t>(it - keys.begin());
    values[i] = value;
    present |= int64_t{1} << i;
  }
  if (present != 0)
    if (Status s = store_step(run, 0, f.step, f.time, tokens, values, present, counts); !s) return s;
  for (const auto& [key, value] : extras) {
    Result<int64_t> id = key_id(key);
    if (!id) return id.error();
    if (Status s = extra_new_.bind(1, run).bind(2, *id).bind(3, 0).bind(4, f.step).bind(5, value).run(); !s) return s;
    if (sqlite3_changes(db_) != 1) {
      ++counts.duplicates;
      continue;
    }
    ++counts.points;
    buckets_.add(run, *id, 0, BucketPoint{f.step, f.time, 0, value});
  }
  return Status::Ok();
}

// The run must exist; the source gets its row (offset 0) the first time it is seen.
Status Ingester::open_source(RunId run, std::string_view source) {
  run_exists_.bind(1, run);
  Result<bool> exists = run_exists_.step();
  if (!exists) return exists.error();
  if (!*exists) return Error{"run", std::to_string(run), "no such run in the store"};
  run_exists_.reset();
  return source_new_.bind(1, run).bind(2, source).run();
}

Result<IngestCounts> Ingester::ingest_foreign(RunId run, std::string_view source, uint64_t offset,
                                              const std::vector<ForeignStep>& steps) {
  if (Status s = open_source(run, source); !s) return s.error();
  IngestCounts counts;
  for (const ForeignStep& f : steps) {
    ++counts.lines;
    if (Status s = foreign_step(run, f, counts); !s) return s.error();
  }
  if (Status s = source_put_.bind(1, run).bind(2, source).bind(3, static_cast<int64_t>(offset))
                     .bind(4, counts.lines).bind(5, int64_t{0}).bind(6, int64_t{0}).run();
      !s)
    return s.error();
  counts.offset = offset;
  return counts;
}

// An eval record: one point of the "eval_loss" series (a metrics_extra row, like every key that
// is not a step column), at the step it follows, with that step's time and cumulative tokens
// when the step is stored (its x on the time and tokens axes).
Status Ingester::on_eval(RunId run, const EvalRecord& r, IngestCounts& counts) {
  Result<int64_t> key = key_id(kEvalLossKey);
  if (!key) return key.error();
  Result<RankState*> state = rank_state(run, r.rank);
  if (!state) return state.error();
  BucketPoint p{r.step, r.time, 0, r.loss};
  if (r.step == (*state)->last_step) {
    p.tokens = (*state)->tokens;
  } else {
    step_prev_.bind(1, run).bind(2, r.rank).bind(3, r.step + 1);  // the row at r.step or before
    Result<bool> prev = step_prev_.step();
    if (!prev) return prev.error();
    if (*prev) {
      p.tokens = step_prev_.real(0);
      step_prev_.reset();
    }
  }
  if (Status s = extra_new_.bind(1, run).bind(2, *key).bind(3, r.rank).bind(4, r.step).bind(5, r.loss).run(); !s)
    return s;
  if (sqlite3_changes(db_) != 1) {
    ++counts.duplicates;
    return Status::Ok();
  }
  ++counts.points;
  buckets_.add(run, *key, r.rank, p);
  aggs_.add(run, *key, r.rank, r.step, r.loss, p.time, p.tokens);
  return Status::Ok();
}

Status Ingester::on_start(RunId run, const StartRecord& r) {
  if (Status s = rank_start_.bind(1, run).bind(2, r.rank).bind(3, r.node).bind(4, r.host)
                     .bind(5, r.pid).bind(6, r.time).run();
      !s)
    return s;
  if (Status s = run_running_.bind(1, run).run(); !s) return s;
  if (r.world > 0)
    if (Status s = run_world_.bind(1, run).bind(2, r.world).run(); !s) return s;
  if (r.config.is_object() && !r.config.empty())
    if (Status s = run_config_.bind(1, run).bind(2, r.config.dump()).run(); !s) return s;
  return Status::Ok();
}

Status Ingester::on_end(RunId run, const EndRecord& r) {
  // Finished ranks are counted as their end records arrive (a repeated record changes nothing):
  // +1 when a rank becomes ok, -1 when an ok rank is re-reported otherwise.
  rank_status_.bind(1, run).bind(2, r.rank);
  Result<std::optional<std::string>> before = rank_status_.first([&] { return rank_status_.text(0); });
  if (!before) return before.error();
  const int was_ok = before->value_or("") == kStatusOk ? 1 : 0;
  const int is_ok = r.status == kStatusOk ? 1 : 0;
  if (is_ok != was_ok)
    if (Status s = ranks_ok_.bind(1, run).bind(2, is_ok - was_ok).run(); !s) return s;
  // The rank is done: its open chart buckets are complete.
  Result<RankState*> state = rank_state(run, r.rank);
  if (!state) return state.error();
  open_buckets_.flush_open(run, r.rank, (*state)->open);
  if (Status s = rank_end_.bind(1, run).bind(2, r.rank).bind(3, r.status).bind(4, r.reason)
                     .bind(5, r.time).run();
      !s)
    return s;
  const std::string why = "rank " + std::to_string(r.rank) + ": " + r.reason;
  if (r.status == "failed") {
    if (Status s = run_failed_.bind(1, run).bind(2, why).bind(3, r.time).run(); !s) return s;
    return event_.bind(1, run).bind(2, r.time).bind(3, "error")
        .bind(4, "rank " + std::to_string(r.rank) + " failed: " + r.reason).run();
  }
  if (r.status == "stopped") return run_stopped_.bind(1, run).bind(2, why).bind(3, r.time).run();
  return run_ok_.bind(1, run).bind(2, r.time).run();
}

// The step lines of a chunk are stored rank by rank (a stable sort: each rank's own order is
// kept, and every other record waits until the steps before it are stored). A shared metrics file
// interleaves the ranks step by step; inserted in file order each row lands in another rank's
// part of the (run, rank, step) B-tree, in rank order they are appends: this made a shared file
// import ~20 % slower than the same lines as per-rank files. Everything a step updates is per
// rank or order-free (aggregates), and the chunk commits as a whole, so the order is not visible.
Status Ingester::store_pending_steps(RunId run, IngestCounts& counts) {
  std::stable_sort(pending_steps_.begin(), pending_steps_.end(),
                   [](const StepRecord& a, const StepRecord& b) { return a.rank < b.rank; });
  for (const StepRecord& r : pending_steps_)
    if (Status s = on_step(run, r, counts); !s) {
      pending_steps_.clear();
      return s;
    }
  pending_steps_.clear();
  return Status::Ok();
}

Status Ingester::malformed_event(RunId run, std::string_view source, uint64_t offset,
                                 const Error& error, int64_t seen_before) {
  if (seen_before >= kMaxLoggedBadLines) return Status::Ok();
  std::string text = std::string(source) + " at byte " + std::to_string(offset) + ": " +
                     error.message();
  if (seen_before + 1 == kMaxLoggedBadLines) text += " (further bad lines are only counted)";
  return event_.bind(1, run).bind(2, 0.0).bind(3, "warning").bind(4, text).run();
}

Result<IngestCounts> Ingester::ingest(RunId run, std::string_view source, uint64_t start_offset,
                                      std::string_view bytes, bool at_eof) {
  pending_steps_.clear();
  if (Status s = open_source(run, source); !s) return s.error();
  source_get_.bind(1, run).bind(2, source);
  Result<bool> row = source_get_.step();
  if (!row) return row.error();
  const uint64_t stored = static_cast<uint64_t>(source_get_.int64(0));
  int64_t bad_before = source_get_.int64(1);
  source_get_.reset();

  IngestCounts counts;
  counts.offset = stored;
  if (start_offset > stored)
    return Error{"offset", std::string(source) + " at byte " + std::to_string(start_offset),
                 "the store holds this source up to byte " + std::to_string(stored) +
                     "; resend from there"};
  // Skip what an earlier chunk already stored (a resend after a lost link).
  const uint64_t skip = stored - start_offset;
  if (skip >= bytes.size()) return counts;
  bytes.remove_prefix(skip);

  uint64_t offset = stored;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (!at_eof) break;
      nl = bytes.size();
    }
    const std::string_view line = trim(bytes.substr(pos, nl - pos));
    const uint64_t line_offset = offset;
    offset += std::min(nl + 1, bytes.size()) - pos;
    pos = nl + 1;
    ++counts.lines;
    if (line.empty()) continue;  // blank lines carry nothing and are not errors
    if (std::optional<StepRecord> step = parse_step_line(line)) {
      pending_steps_.push_back(*step);
      continue;
    }
    Result<MetricsRecord> rec = parse_metrics_line(line);
    if (rec && std::holds_alternative<StepRecord>(*rec)) {
      pending_steps_.push_back(std::get<StepRecord>(*rec));
      continue;
    }
    if (Status s = store_pending_steps(run, counts); !s) return s.error();
    if (!rec) {
      ++(is_unknown_kind(rec.error()) ? counts.unknown : counts.malformed);
      if (Status s = malformed_event(run, source, line_offset, rec.error(), bad_before++); !s)
        return s.error();
      continue;
    }
    Status s = std::visit(
        [&](const auto& r) -> Status {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, StepRecord>) return on_step(run, r, counts);
          else if constexpr (std::is_same_v<T, StartRecord>) return on_start(run, r);
          else if constexpr (std::is_same_v<T, EvalRecord>) return on_eval(run, r, counts);
          else if constexpr (std::is_same_v<T, CalibrationRecord>) return store_calibration_record(db_, run, r);
          else return on_end(run, r);
        },
        *rec);
    if (!s) return s.error();
  }
  if (Status s = store_pending_steps(run, counts); !s) return s.error();
  counts.offset = offset;
  if (Status s = source_put_.bind(1, run).bind(2, source).bind(3, static_cast<int64_t>(offset))
                     .bind(4, counts.lines).bind(5, counts.malformed).bind(6, counts.unknown).run();
      !s)
    return s.error();
  return counts;
}

Status Ingester::finish() {
  if (open_buckets_.has_pending())
    if (Status s = series_keys(); !s) return s;
  // Closed level-1 rows first, then late points merged into them, then the coarser levels
  // computed from their children (open_buckets.h).
  if (Status s = open_buckets_.write_level1(); !s) return s;
  if (Status s = buckets_.flush(); !s) return s;
  if (Status s = open_buckets_.write_parents(); !s) return s;
  return aggs_.flush();
}

void Ingester::flush_open(std::optional<RunId> run) {
  for (auto& [id, state] : ranks_)
    if (!run || id.first == *run) open_buckets_.flush_open(id.first, id.second, state.open);
}

}  // namespace meshwork::store
