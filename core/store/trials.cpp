#include "core/store/trials.h"

#include <algorithm>
#include <chrono>

#include "core/mesh_json.h"
#include "core/store/run_frame.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Error no_entry(TrialId trial, int position) {
  return Error{"trial", std::to_string(trial) + " #" + std::to_string(position), "no such shape in the trial group"};
}

std::optional<double> percent_error(const std::optional<double>& measured, double predicted) {
  if (!measured || !(predicted > 0)) return std::nullopt;
  return (*measured - predicted) / predicted * 100.0;
}

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

Status ensure_trial_tables(sqlite3* db) {
  return sql::exec(db,
                   "CREATE TABLE IF NOT EXISTS trials(id INTEGER PRIMARY KEY, created REAL NOT NULL,"
                   " plan_json TEXT NOT NULL);"
                   "CREATE TABLE IF NOT EXISTS trial_runs(trial INTEGER NOT NULL, position INTEGER NOT NULL,"
                   " run INTEGER, shape TEXT NOT NULL, predicted_tokens_per_s REAL NOT NULL,"
                   " predicted_step_s REAL NOT NULL, predicted_peak_bytes INTEGER NOT NULL, error TEXT,"
                   " PRIMARY KEY(trial, position));"
                   "CREATE INDEX IF NOT EXISTS trial_runs_run ON trial_runs(run);");
}

Result<TrialId> create_trial(RunStore& store, const nlohmann::json& plan) {
  sqlite3* db = store.handle();
  if (Status s = ensure_trial_tables(db); !s) return s.error();
  sql::Stmt put(db, "INSERT INTO trials(created, plan_json) VALUES (?1, ?2)");
  if (!put.ok()) return put.error();
  if (Status s = put.bind(1, now_s()).bind(2, plan.dump()).run(); !s) return s.error();
  return static_cast<TrialId>(sqlite3_last_insert_rowid(db));
}

Status add_trial_entry(RunStore& store, TrialId trial, int position, const TrialPrediction& p) {
  sqlite3* db = store.handle();
  if (Status s = ensure_trial_tables(db); !s) return s;
  if (position < 1) return Error{"position", std::to_string(position), "a whole number >= 1"};
  sql::Stmt put(db,
                "INSERT INTO trial_runs(trial, position, run, shape, predicted_tokens_per_s, predicted_step_s,"
                " predicted_peak_bytes, error) SELECT ?1, ?2, NULL, ?3, ?4, ?5, ?6, NULL"
                " WHERE EXISTS (SELECT 1 FROM trials WHERE id = ?1)");
  if (!put.ok()) return put.error();
  put.bind(1, trial).bind(2, position).bind(3, to_json(p.shape).dump()).bind(4, p.tokens_per_s).bind(5, p.step_s)
      .bind(6, p.peak_bytes);
  if (Status s = put.run(); !s) return s;
  if (sqlite3_changes(db) != 1) return Error{"trial", std::to_string(trial), "no such trial group in the store"};
  return Status::Ok();
}

namespace {
// Sets a column of one entry: `update` names the trial ?1, the position ?2 and the new value ?3.
template <typename Value>
Status update_trial_entry(RunStore& store, TrialId trial, int position, const char* update, const Value& value) {
  sqlite3* db = store.handle();
  if (Status s = ensure_trial_tables(db); !s) return s;
  sql::Stmt put(db, update);
  if (!put.ok()) return put.error();
  if (Status s = put.bind(1, trial).bind(2, position).bind(3, value).run(); !s) return s;
  return sqlite3_changes(db) == 1 ? Status::Ok() : Status(no_entry(trial, position));
}
}  // namespace

Status set_trial_run(RunStore& store, TrialId trial, int position, RunId run) {
  return update_trial_entry(store, trial, position,
                            "UPDATE trial_runs SET run = ?3, error = NULL WHERE trial = ?1 AND position = ?2", run);
}

Status set_trial_error(RunStore& store, TrialId trial, int position, std::string_view error) {
  return update_trial_entry(store, trial, position, "UPDATE trial_runs SET error = ?3 WHERE trial = ?1 AND position = ?2",
                            error);
}

std::optional<double> TrialResult::tokens_error_percent() const {
  return percent_error(tokens_per_s, predicted.tokens_per_s);
}

std::optional<double> TrialResult::peak_error_percent() const {
  return percent_error(peak_bytes, static_cast<double>(predicted.peak_bytes));
}

namespace {
// 0: measured and not ended badly; 1: measured, but the run failed or was stopped; 2: unmeasured.
int rank_group(const TrialResult& r) {
  if (!r.measured()) return 2;
  return r.status == kStatusFailed || r.status == kStatusStopped ? 1 : 0;
}
}  // namespace

void rank_trial_results(std::vector<TrialResult>& results) {
  std::stable_sort(results.begin(), results.end(), [](const TrialResult& a, const TrialResult& b) {
    const int ga = rank_group(a), gb = rank_group(b);
    if (ga != gb) return ga < gb;
    if (ga < 2 && *a.tokens_per_s != *b.tokens_per_s) return *a.tokens_per_s > *b.tokens_per_s;
    return a.position < b.position;
  });
}

const TrialResult* Trial::winner() const {
  for (const TrialResult& r : results)  // ranked: the first measured one that ended ok
    if (r.measured() && r.status == kStatusOk) return &r;
  return nullptr;
}

Result<std::optional<double>> measured_peak_bytes(RunStore& store, RunId run) {
  SeriesQuery q;
  q.runs = {run};
  q.key = "mem_peak_bytes";
  q.aggregate = Aggregate::max;  // over every rank, per step
  q.pixels = 64;                 // decimation keeps each column's max: the highest point survives
  auto series = store.query_series(q);
  if (!series) return series.error();
  std::optional<double> peak;
  for (const Series& s : *series)
    for (const Point& p : s.points) peak = peak ? std::max(*peak, p.y) : p.y;
  return peak;
}

Result<Trial> load_trial(RunStore& store, TrialId id) {
  sqlite3* db = store.handle();
  if (Status s = ensure_trial_tables(db); !s) return s.error();
  Trial t;
  {
    sql::Stmt q(db, "SELECT id, created, plan_json FROM trials WHERE id = ?1");
    if (!q.ok()) return q.error();
    q.bind(1, id);
    Result<bool> row = q.step();
    if (!row) return row.error();
    if (!*row) return Error{"trial", std::to_string(id), "no such trial group in the store"};
    t.id = q.int64(0);
    t.created = q.real(1);
    t.plan = nlohmann::json::parse(q.text(2), nullptr, false);
    if (t.plan.is_discarded()) t.plan = nlohmann::json::object();
    q.reset();
  }
  sql::Stmt q(db,
              "SELECT position, run, shape, predicted_tokens_per_s, predicted_step_s, predicted_peak_bytes, error,"
              " (run IS NOT NULL AND EXISTS (SELECT 1 FROM runs WHERE runs.id = trial_runs.run))"
              " FROM trial_runs WHERE trial = ?1 ORDER BY position");
  if (!q.ok()) return q.error();
  q.bind(1, id);
  struct Row {
    TrialResult r;
    bool run_exists = false;
  };
  std::vector<Row> rows;
  Status s = q.each_row([&]() -> Status {
    Row row;
    TrialResult& r = row.r;
    r.position = static_cast<int>(q.int64(0));
    if (!q.is_null(1)) r.run = q.int64(1);
    auto shape = mesh_shape_from_json(nlohmann::json::parse(q.text(2), nullptr, false), "trial_runs.shape", false);
    if (!shape) return shape.error().as(ErrorKind::io);
    r.predicted.shape = *shape;
    r.predicted.tokens_per_s = q.real(3);
    r.predicted.step_s = q.real(4);
    r.predicted.peak_bytes = q.int64(5);
    r.reason = q.text(6);
    row.run_exists = q.int64(7) != 0;
    rows.push_back(std::move(row));
    return Status::Ok();
  });
  if (!s) return s.error();
  for (Row& row : rows) {
    TrialResult& r = row.r;
    if (!r.run) {
      r.status = r.reason.empty() ? std::string(kTrialPending) : std::string(kTrialNotLaunched);
    } else if (!row.run_exists) {
      r.status = std::string(kTrialRunDeleted);
    } else {
      auto info = store.get_run(*r.run);
      if (!info) return info.error();
      const RunSummary& sum = info->summary;
      r.run_name = sum.name;
      r.status = sum.status;
      r.reason = sum.exit_reason;
      r.tokens_per_s = run_tokens_per_s(sum);
      auto peak = measured_peak_bytes(store, *r.run);
      if (!peak) return peak.error();
      r.peak_bytes = *peak;
    }
    t.results.push_back(std::move(r));
  }
  rank_trial_results(t.results);
  return t;
}

Result<std::vector<TrialSummary>> list_trials(RunStore& store) {
  sqlite3* db = store.handle();
  if (Status s = ensure_trial_tables(db); !s) return s.error();
  sql::Stmt q(db,
              "SELECT t.id, t.created, (SELECT count(*) FROM trial_runs r WHERE r.trial = t.id)"
              " FROM trials t ORDER BY t.id DESC");
  if (!q.ok()) return q.error();
  return q.collect([&] { return TrialSummary{q.int64(0), q.real(1), static_cast<int>(q.int64(2))}; });
}

nlohmann::json to_json(const Trial& t) {
  nlohmann::json results = nlohmann::json::array();
  for (const TrialResult& r : t.results) {
    results.push_back({
        {"position", r.position},
        {"shape", to_json(r.predicted.shape)},
        {"run", r.run ? nlohmann::json(*r.run) : nlohmann::json(nullptr)},
        {"name", r.run_name},
        {"status", r.status},
        {"reason", r.reason},
        {"measured", {{"tokens_per_s", opt(r.tokens_per_s)}, {"peak_bytes", opt(r.peak_bytes)}}},
        {"predicted",
         {{"tokens_per_s", r.predicted.tokens_per_s},
          {"step_s", r.predicted.step_s},
          {"peak_bytes", r.predicted.peak_bytes}}},
        {"tokens_per_s_error_percent", opt(r.tokens_error_percent())},
        {"peak_error_percent", opt(r.peak_error_percent())},
    });
  }
  const TrialResult* w = t.winner();
  return {{"id", t.id},
          {"created", t.created},
          {"plan", t.plan},
          {"winner", w ? nlohmann::json(w->position) : nlohmann::json(nullptr)},
          {"results", results}};
}

}  // namespace meshwork::store
