// RunStore: opening, runs, ranks, events and ingest transactions. Chart queries and CSV export
// are in series_query.cpp.
#include "core/store/run_store.h"

#include <fcntl.h>
#include <unistd.h>

#include "core/mesh_json.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <system_error>
#include <thread>

#include "core/store/ingester.h"
#include "core/metrics.h"
#include "core/store/rank_states.h"
#include "core/store/run_segments.h"
#include "core/store/schema.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

IngestCounts& IngestCounts::operator+=(const IngestCounts& o) {
  lines += o.lines;
  points += o.points;
  duplicates += o.duplicates;
  malformed += o.malformed;
  unknown += o.unknown;
  offset = o.offset;
  return *this;
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json parse_json_or_empty(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// The config's mesh (axes default to 1); unset without a valid mesh. Fills *world from it when
// the world is not known yet.
std::optional<MeshShape> shape_of(const nlohmann::json& config, int* world) {
  auto it = config.find("mesh");
  if (it == config.end()) return std::nullopt;
  auto shape = mesh_shape_from_json(*it);
  if (!shape) return std::nullopt;
  const int64_t product = shape->world_size();
  if (*world == 0 && product > 0) *world = static_cast<int>(product);
  return *shape;
}

std::string model_of(const nlohmann::json& config) {
  auto it = config.find("model");
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    for (const char* k : {"name", "model_type"})
      if (auto n = it->find(k); n != it->end() && n->is_string()) return n->get<std::string>();
    return "inline";
  }
  return {};
}

Error no_run(RunId run) { return Error{"run", std::to_string(run), "no such run in the store"}; }

}  // namespace

RunStore::~RunStore() {
  if (ingester_) (void)flush_open_buckets();  // best effort: a later open recomputes them anyway
  ingester_.reset();  // finalize its statements before closing
  if (db_) sqlite3_close_v2(db_);
}

Result<std::unique_ptr<RunStore>> RunStore::open(const std::filesystem::path& path,
                                                 Options options) {
  std::unique_ptr<RunStore> store(new RunStore());
  store->path_ = path;
  if (!options.read_only && path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return Error{"store", path.string(), "cannot create its directory: " + ec.message()}.as(ErrorKind::io);
  }
  if (!options.read_only) {
    // The store holds host names, run configs and commands: private to the user (0600). SQLite
    // gives its -wal and -shm files the database file's mode, so creating the file first with
    // 0600 (O_EXCL: whoever creates it, creates it private) covers all three.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  const int flags = (options.read_only ? SQLITE_OPEN_READONLY
                                       : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &store->db_, flags, nullptr) != SQLITE_OK)
    return Error{"store", path.string(),
                 std::string("cannot open the database: ") +
                     (store->db_ ? sqlite3_errmsg(store->db_) : "out of memory")}
        .as(ErrorKind::io);
  sqlite3_busy_timeout(store->db_, options.busy_timeout_ms);
  sqlite3* db = store->db_;
  // WAL: readers see the last commit and never block the writer. synchronous=NORMAL in WAL mode
  // loses no commit when a process dies (only an OS crash/power loss can drop the last ones).
  // 64 MiB page cache and mmap keep chart reads off the read() path.
  const char* pragmas = options.read_only
                            ? "PRAGMA cache_size=-65536; PRAGMA mmap_size=268435456;"
                            : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                              "PRAGMA cache_size=-65536; PRAGMA mmap_size=268435456;"
                              "PRAGMA temp_store=MEMORY;";
  // Switching a new file to WAL needs a moment alone with it, and SQLite answers "locked" at
  // once, without its busy handler, when another connection opens it at the same instant (seen
  // in StoreSchema.ConcurrentFirstOpensAllSucceed): wait and retry within the busy timeout.
  Status pragmas_set = sql::exec(db, pragmas);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  while (!pragmas_set && pragmas_set.error().allowed.find("locked") != std::string::npos &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pragmas_set = sql::exec(db, pragmas);
  }
  if (!pragmas_set)
    return Error{"store", path.string(), "is not a usable SQLite database: " + pragmas_set.error().allowed}
        .as(ErrorKind::io);
  if (options.read_only) {
    Result<int> v = read_schema_version(db);
    if (!v) return v.error();
    if (*v != kSchemaVersion)
      return Error{"store", path.string(),
                   "has schema version " + std::to_string(*v) + "; open it read-write to migrate"}
          .as(ErrorKind::io);
    return store;
  }
  RunStore* self = store.get();
  Status s = ensure_schema(db, [self]() -> Status {
    sql::Stmt runs(self->db_, "SELECT id FROM runs");
    Result<std::vector<RunId>> ids = runs.collect([&] { return runs.int64(0); });
    if (!ids) return ids.error();
    for (RunId id : *ids)
      if (Status r = self->rebuild_derived_in_tx(id); !r) return r;
    return Status::Ok();
  });
  if (!s) {
    store->ingester_.reset();
    return Error{"store", path.string(), s.error().message(), s.error().kind};
  }
  store->ingester_.reset();  // statements prepared during a migration: prepare afresh
  store->ingester_ = std::make_unique<Ingester>(db);
  if (Status p = store->ingester_->prepared(); !p) return p.error();
  return store;
}

int RunStore::schema_version() const {
  Result<int> v = read_schema_version(db_);
  return v ? *v : -1;
}

Result<RunId> RunStore::create_run(std::string_view name, const nlohmann::json& config,
                                   const nlohmann::json& cluster, std::string_view origin) {
  if (name.empty()) return Error{"name", "", "a run needs a non-empty name"};
  const nlohmann::json cfg = config.is_object() ? config : nlohmann::json::object();
  int world = 0;
  shape_of(cfg, &world);
  sql::Stmt ins(db_,
                "INSERT INTO runs(name, created, config, cluster, origin, world)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  ins.bind(1, name).bind(2, now_s()).bind(3, cfg.dump())
      .bind(4, (cluster.is_object() ? cluster : nlohmann::json::object()).dump())
      .bind(5, origin).bind(6, world);
  if (Status s = ins.run(); !s) return s.error();
  return static_cast<RunId>(sqlite3_last_insert_rowid(db_));
}

Status RunStore::set_status(RunId run, std::string_view status, std::string_view reason) {
  static const std::vector<std::string_view> allowed = {kStatusCreated, kStatusRunning, kStatusOk,
                                                        kStatusFailed, kStatusStopped};
  if (std::find(allowed.begin(), allowed.end(), status) == allowed.end())
    return Error{"status", std::string(status), "allowed: created, running, ok, failed, stopped"};
  sql::Stmt up(db_, "UPDATE runs SET status = ?2, exit_reason = ?3,"
                    " ended = CASE WHEN ?2 IN ('ok','failed','stopped') THEN ?4 ELSE ended END"
                    " WHERE id = ?1");
  if (Status s = up.bind(1, run).bind(2, status).bind(3, reason).bind(4, now_s()).run(); !s)
    return s;
  return sqlite3_changes(db_) == 1 ? Status::Ok() : Status(no_run(run));
}

Status RunStore::rename_run(RunId run, std::string_view name) {
  if (name.empty()) return Error{"name", "", "a run needs a non-empty name"};
  sql::Stmt up(db_, "UPDATE runs SET name = ?2 WHERE id = ?1");
  if (Status s = up.bind(1, run).bind(2, name).run(); !s) return s;
  return sqlite3_changes(db_) == 1 ? Status::Ok() : Status(no_run(run));
}

Status RunStore::delete_run(RunId run) {
  sql::Transaction tx(db_);
  if (!tx.begun()) return tx.begun();
  for (const char* table : {"steps", "metrics_extra", "buckets", "rank_agg", "run_stats", "ranks",
                            "events", "sources", "moe_steps", "expert_load"}) {
    sql::Stmt del(db_, std::string("DELETE FROM ") + table + " WHERE run = ?1");
    if (Status s = del.bind(1, run).run(); !s) return s;
  }
  if (Status s = forget_rank_states(db_, run); !s) return s;
  if (Status s = forget_run_segments(db_, run); !s) return s;
  sql::Stmt del(db_, "DELETE FROM runs WHERE id = ?1");
  if (Status s = del.bind(1, run).run(); !s) return s;
  if (sqlite3_changes(db_) != 1) return no_run(run);
  if (ingester_) ingester_->forget();
  return tx.commit();
}

Result<RunInfo> RunStore::get_run(RunId run) {
  // Totals kept at ingest (run_stats) and the last cross-rank aggregate of "loss" (rank_agg):
  // a few index seeks however many ranks the run has. (Summing every rank's level-0 bucket took
  // ~150 ms at 8,192 ranks.) final loss = the lowest rank's loss at the highest step of "loss".
  sql::Stmt q(db_,
              "SELECT r.id, r.name, r.created, r.status, r.exit_reason, r.config, r.cluster,"
              " r.world, r.origin, st.last_step, st.points,"
              " (SELECT a.x_v FROM rank_agg a WHERE a.run = r.id"
              "   AND a.key = (SELECT id FROM keys WHERE name = 'loss') ORDER BY a.step DESC LIMIT 1),"
              " (SELECT avg(m.v_tokens_per_s) FROM (SELECT v_tokens_per_s FROM steps"
              "   WHERE run = r.id AND rank = (SELECT min(rank) FROM steps WHERE run = r.id)"
              "   AND (present >> 4) & 1 ORDER BY step DESC LIMIT 10) m)"
              " FROM runs r LEFT JOIN run_stats st ON st.run = r.id WHERE r.id = ?1");
  q.bind(1, run);
  Result<bool> row = q.step();
  if (!row) return row.error();
  if (!*row) return no_run(run);
  RunInfo info;
  RunSummary& s = info.summary;
  s.id = q.int64(0);
  s.name = q.text(1);
  s.created = q.real(2);
  s.status = q.text(3);
  s.exit_reason = q.text(4);
  info.config = parse_json_or_empty(q.text(5));
  info.cluster = parse_json_or_empty(q.text(6));
  s.world = static_cast<int>(q.int64(7));
  s.origin = q.text(8);
  s.steps = q.is_null(9) ? 0 : q.int64(9);
  s.points = q.is_null(10) ? 0 : q.int64(10);
  if (!q.is_null(11)) s.final_loss = q.real(11);
  if (!q.is_null(12)) s.tokens_per_s = q.real(12);
  q.reset();
  s.shape = shape_of(info.config, &s.world);
  s.model = model_of(info.config);
  return info;
}

Result<std::vector<RunSummary>> RunStore::list_runs() {
  sql::Stmt ids(db_, "SELECT id FROM runs ORDER BY created DESC, id DESC");
  Result<std::vector<RunId>> all = ids.collect([&] { return ids.int64(0); });
  if (!all) return all.error();
  std::vector<RunSummary> out;
  for (RunId id : *all) {
    Result<RunInfo> info = get_run(id);
    if (!info) return info.error();
    out.push_back(std::move(info->summary));
  }
  return out;
}

Result<RunId> RunStore::resolve_run(std::string_view id_or_name) {
  const bool numeric = !id_or_name.empty() &&
                       std::all_of(id_or_name.begin(), id_or_name.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
  if (numeric && id_or_name.size() < 18) {
    sql::Stmt q(db_, "SELECT id FROM runs WHERE id = ?1");
    q.bind(1, static_cast<int64_t>(std::stoll(std::string(id_or_name))));
    Result<std::optional<RunId>> id = q.first([&] { return q.int64(0); });
    if (!id) return id.error();
    if (*id) return **id;
  }
  sql::Stmt q(db_, "SELECT id FROM runs WHERE name = ?1 ORDER BY id");
  q.bind(1, id_or_name);
  Result<std::vector<RunId>> found = q.collect([&] { return q.int64(0); });
  if (!found) return found.error();
  if (found->size() == 1) return (*found)[0];
  if (found->empty())
    return Error{"RUN", std::string(id_or_name), "no run with this id or name; see `meshwork runs list`"};
  std::string ids;
  for (RunId id : *found) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  return Error{"RUN", std::string(id_or_name), "several runs have this name; use an id: " + ids};
}

Result<std::optional<RunId>> RunStore::find_run_by_origin(std::string_view origin) {
  sql::Stmt q(db_, "SELECT id FROM runs WHERE origin = ?1 ORDER BY id LIMIT 1");
  q.bind(1, origin);
  return q.first([&] { return q.int64(0); });
}

Result<std::vector<RankInfo>> RunStore::ranks(RunId run) {
  sql::Stmt q(db_, "SELECT rank, coalesce(node, 0), coalesce(host, ''), coalesce(pid, 0), status,"
                   " reason FROM ranks WHERE run = ?1 ORDER BY rank");
  q.bind(1, run);
  return q.collect([&] {
    return RankInfo{static_cast<int>(q.int64(0)), static_cast<int>(q.int64(1)), q.text(2),
                    q.int64(3), q.text(4), q.text(5)};
  });
}

Status RunStore::add_event(RunId run, std::string_view level, std::string_view text, double time) {
  if (level != "info" && level != "warning" && level != "error")
    return Error{"level", std::string(level), "allowed: info, warning, error"};
  sql::Stmt ins(db_, "INSERT INTO events(run, time, level, text)"
                     " SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?1)");
  if (Status s = ins.bind(1, run).bind(2, time > 0 ? time : now_s()).bind(3, level).bind(4, text).run();
      !s)
    return s;
  return sqlite3_changes(db_) == 1 ? Status::Ok() : Status(no_run(run));
}

Result<std::vector<Event>> RunStore::events(RunId run) {
  sql::Stmt q(db_, "SELECT id, run, time, level, text FROM events WHERE run = ?1 ORDER BY id");
  q.bind(1, run);
  return q.collect([&] { return Event{q.int64(0), q.int64(1), q.real(2), q.text(3), q.text(4)}; });
}

Result<uint64_t> RunStore::source_offset(RunId run, std::string_view source) {
  sql::Stmt q(db_, "SELECT offset FROM sources WHERE run = ?1 AND name = ?2");
  q.bind(1, run).bind(2, source);
  Result<std::optional<uint64_t>> off = q.first([&] { return static_cast<uint64_t>(q.int64(0)); });
  if (!off) return off.error();
  return off->value_or(0);
}

Result<std::vector<SourceInfo>> RunStore::sources(RunId run) {
  sql::Stmt q(db_, "SELECT name, offset, lines, malformed, unknown FROM sources WHERE run = ?1"
                   " ORDER BY name");
  q.bind(1, run);
  return q.collect([&] {
    return SourceInfo{q.text(0), static_cast<uint64_t>(q.int64(1)), q.int64(2), q.int64(3),
                      q.int64(4)};
  });
}

Result<IngestCounts> RunStore::ingest_one(RunId run, std::string_view source,
                                          uint64_t start_offset, std::string_view bytes,
                                          bool at_eof) {
  if (!ingester_) return Error{"store", path_.string(), "is open read-only"}.as(ErrorKind::io);
  sql::Transaction tx(db_);
  if (!tx.begun()) return tx.begun().error();
  Result<IngestCounts> r = ingester_->ingest(run, source, start_offset, bytes, at_eof);
  if (r && at_eof) ingester_->flush_open(run);  // an import's last chunk: its buckets are complete
  if (!r) {
    ingester_->forget();
    return r.error();
  }
  if (Status s = ingester_->finish_and_commit(tx); !s) return s.error();
  return r;
}

Result<IngestCounts> RunStore::ingest_chunk(RunId run, std::string_view source,
                                            uint64_t start_offset, std::string_view bytes) {
  return ingest_one(run, source, start_offset, bytes, false);
}

Result<std::vector<Result<IngestCounts>>> RunStore::ingest_chunks(
    const std::vector<ChunkRef>& chunks) {
  if (!ingester_) return Error{"store", path_.string(), "is open read-only"}.as(ErrorKind::io);
  sql::Transaction tx(db_);
  if (!tx.begun()) return tx.begun().error();
  std::vector<Result<IngestCounts>> out;
  for (const ChunkRef& c : chunks) {
    Result<IngestCounts> r = ingester_->ingest(c.run, c.source, c.start_offset, c.bytes, false);
    if (!r && r.error().field == "database") {
      ingester_->forget();
      return r.error();
    }
    out.push_back(std::move(r));
  }
  if (Status s = ingester_->finish_and_commit(tx); !s) return s.error();
  return out;
}

Result<IngestCounts> RunStore::ingest_foreign(RunId run, std::string_view source, uint64_t offset,
                                             const std::vector<ForeignStep>& steps) {
  if (!ingester_) return Error{"store", path_.string(), "is open read-only"}.as(ErrorKind::io);
  sql::Transaction tx(db_);
  if (!tx.begun()) return tx.begun().error();
  Result<IngestCounts> r = ingester_->ingest_foreign(run, source, offset, steps);
  if (!r) {
    ingester_->forget();
    return r.error();
  }
  ingester_->flush_open(run);  // an import is complete: its open buckets are written with it
  if (Status s = ingester_->finish_and_commit(tx); !s) return s.error();
  return r;
}

Result<IngestCounts> RunStore::ingest_file(RunId run, const std::filesystem::path& path,
                                           std::string_view source, size_t chunk_bytes) {
  Result<std::vector<IngestCounts>> r = ingest_files(
      run, {ImportFile{path, source.empty() ? path.string() : std::string(source)}}, chunk_bytes);
  if (!r) return r.error();
  return r->front();
}

Status RunStore::flush_open_buckets(std::optional<RunId> run) {
  if (!ingester_) return Error{"store", path_.string(), "is open read-only"}.as(ErrorKind::io);
  if (!ingester_->has_open(run)) return Status::Ok();  // no write lock for nothing
  sql::Transaction tx(db_);
  if (!tx.begun()) return tx.begun();
  ingester_->flush_open(run);
  Status s = ingester_->finish();
  if (s) s = tx.commit();
  if (!s) ingester_->forget();
  return s;
}

Result<std::vector<std::string>> RunStore::keys(RunId run) {
  sql::Stmt q(db_, "SELECT k.name FROM keys k WHERE EXISTS (SELECT 1 FROM rank_agg a WHERE a.run = ?1"
                   " AND a.key = k.id) ORDER BY k.id");
  q.bind(1, run);
  return q.collect([&] { return q.text(0); });
}

Status RunStore::rebuild_derived_in_tx(RunId run) {
  if (!ingester_) ingester_ = std::make_unique<Ingester>(db_);
  for (const char* table : {"buckets", "rank_agg", "run_stats"}) {
    sql::Stmt del(db_, std::string("DELETE FROM ") + table + " WHERE run = ?1");
    if (Status s = del.bind(1, run).run(); !s) return s;
  }
  // The step series (one row per step, a column per series), then keys without a column.
  std::string cols;
  for (const std::string& c : value_columns()) cols += ", " + c;
  sql::Stmt steps(db_, "SELECT rank, step, time, tokens, present" + cols +
                           " FROM steps WHERE run = ?1");
  std::vector<int64_t> ids;
  for (const std::string& k : step_series_keys()) {
    Result<int64_t> id = ingester_->key_id(k);
    if (!id) return id.error();
    ids.push_back(*id);
  }
  steps.bind(1, run);
  int64_t n = 0;
  Status walked = steps.each_row([&]() -> Status {
    const int rank = static_cast<int>(steps.int64(0));
    BucketPoint p{steps.int64(1), steps.real(2), steps.real(3), 0};
    const int64_t present = steps.int64(4);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!((present >> i) & 1) || steps.is_null(5 + static_cast<int>(i))) continue;
      p.value = steps.real(5 + static_cast<int>(i));
      ingester_->add_bucket_point(run, ids[i], rank, p);
      ingester_->add_agg_point(run, ids[i], rank, p);
    }
    if (++n % (1 << 16) == 0)  // bound memory: merging flushes is exact (upsert min/max/...)
      return ingester_->finish();
    return Status::Ok();
  });
  if (!walked) return walked;
  sql::Stmt q(db_, "SELECT m.key, m.rank, m.step, m.value, coalesce(s.time, 0),"
                   " coalesce(s.tokens, 0) FROM metrics_extra m LEFT JOIN steps s ON s.run = m.run"
                   " AND s.rank = m.rank AND s.step = m.step"
                   " WHERE m.run = ?1 AND m.value IS NOT NULL");
  q.bind(1, run);
  walked = q.each_row([&]() -> Status {
    const BucketPoint p{q.int64(2), q.real(4), q.real(5), q.real(3)};
    ingester_->add_bucket_point(run, q.int64(0), static_cast<int>(q.int64(1)), p);
    ingester_->add_agg_point(run, q.int64(0), static_cast<int>(q.int64(1)), p);
    return ++n % (1 << 20) == 0 ? ingester_->finish() : Status::Ok();
  });
  if (!walked) return walked;
  if (Status s = ingester_->finish(); !s) return s;
  // Finished ranks, counted once here; ingest keeps the count from now on (Ingester::on_end).
  sql::Stmt ok(db_, "INSERT INTO run_stats(run, ranks_ok) VALUES (?1, (SELECT count(*) FROM ranks"
                    " WHERE run = ?1 AND status = 'ok')) ON CONFLICT(run) DO UPDATE SET"
                    " ranks_ok = excluded.ranks_ok");
  return ok.bind(1, run).run();
}

Status RunStore::rebuild_derived(RunId run) {
  if (!ingester_) return Error{"store", path_.string(), "is open read-only"}.as(ErrorKind::io);
  sql::Transaction tx(db_);
  if (!tx.begun()) return tx.begun();
  if (Status s = rebuild_derived_in_tx(run); !s) {
    ingester_->forget();
    return s;
  }
  return tx.commit();
}

int64_t RunStore::data_version() {
  sqlite3_stmt* st = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db_, "PRAGMA data_version", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

}  // namespace meshwork::store
