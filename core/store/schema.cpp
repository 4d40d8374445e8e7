#include "core/store/schema.h"

#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/store/rank_agg.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

const char* const kSchemaV1 = R"sql(
CREATE TABLE schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1);
CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT NOT NULL, created REAL NOT NULL,
  status TEXT NOT NULL DEFAULT 'created', exit_reason TEXT NOT NULL DEFAULT '',
  config TEXT NOT NULL DEFAULT '{}', cluster TEXT NOT NULL DEFAULT '{}');
CREATE TABLE ranks(run INTEGER NOT NULL, rank INTEGER NOT NULL, node INTEGER, host TEXT,
  pid INTEGER, PRIMARY KEY(run, rank));
CREATE TABLE metrics(run INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  time REAL, key TEXT NOT NULL, value REAL, UNIQUE(run, rank, step, key));
CREATE TABLE events(id INTEGER PRIMARY KEY, run INTEGER NOT NULL, time REAL NOT NULL,
  level TEXT NOT NULL, text TEXT NOT NULL);
)sql";

namespace {

// Version 2. Why this layout:
// - metrics is WITHOUT ROWID, keyed (run, key, rank, step) with integer key ids: a series is one
//   contiguous key range (chart reads are range scans), a point costs ~20 bytes, and the primary
//   key is the (run, rank, step, key) uniqueness that makes re-ingest idempotent.
// - time and cumulative tokens are per (run, rank, step), not per point: `steps`.
// - buckets holds, per series and per level k (1..5: 16*8^(k-1) steps per bucket), the first,
//   min, max and last point of each bucket with all three x values, so a chart over millions of
//   points reads a few thousand rows. Level 0 (one bucket per series) is the run summary.
// - sources holds each followed file's byte offset, advanced in the transaction of its lines.
const char* const kTablesV2 = R"sql(
CREATE TABLE IF NOT EXISTS runs(id INTEGER PRIMARY KEY, name TEXT NOT NULL, created REAL NOT NULL,
  status TEXT NOT NULL DEFAULT 'created', exit_reason TEXT NOT NULL DEFAULT '',
  config TEXT NOT NULL DEFAULT '{}', cluster TEXT NOT NULL DEFAULT '{}');
CREATE TABLE ranks2(run INTEGER NOT NULL, rank INTEGER NOT NULL, node INTEGER, host TEXT,
  pid INTEGER, started REAL, status TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
  ended REAL, PRIMARY KEY(run, rank)) WITHOUT ROWID;
CREATE TABLE keys(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE steps(run INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  time REAL NOT NULL, tokens REAL NOT NULL, PRIMARY KEY(run, rank, step)) WITHOUT ROWID;
CREATE TABLE metrics2(run INTEGER NOT NULL, key INTEGER NOT NULL, rank INTEGER NOT NULL,
  step INTEGER NOT NULL, value REAL, PRIMARY KEY(run, key, rank, step)) WITHOUT ROWID;
CREATE TABLE buckets(run INTEGER NOT NULL, key INTEGER NOT NULL, rank INTEGER NOT NULL,
  level INTEGER NOT NULL, bucket INTEGER NOT NULL, n INTEGER NOT NULL,
  f_step INTEGER, f_time REAL, f_tok REAL, f_v REAL,
  lo_step INTEGER, lo_time REAL, lo_tok REAL, lo_v REAL,
  hi_step INTEGER, hi_time REAL, hi_tok REAL, hi_v REAL,
  la_step INTEGER, la_time REAL, la_tok REAL, la_v REAL,
  PRIMARY KEY(run, key, rank, level, bucket)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, run INTEGER NOT NULL,
  time REAL NOT NULL, level TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX events_run ON events(run, time);
CREATE TABLE sources(run INTEGER NOT NULL, name TEXT NOT NULL, offset INTEGER NOT NULL DEFAULT 0,
  lines INTEGER NOT NULL DEFAULT 0, malformed INTEGER NOT NULL DEFAULT 0,
  unknown INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(run, name)) WITHOUT ROWID;
)sql";

const char* const kViewsV2 = R"sql(
CREATE INDEX runs_origin ON runs(origin);
CREATE VIEW summary AS SELECT b.run, k.name AS key, b.rank, b.n, b.lo_v AS min, b.hi_v AS max,
  b.la_v AS final, b.la_step AS final_step FROM buckets b JOIN keys k ON k.id = b.key
  WHERE b.level = 0;
CREATE VIEW metrics_v AS SELECT m.run, m.rank, m.step, s.time, s.tokens, k.name AS key, m.value
  FROM metrics m JOIN keys k ON k.id = m.key
  LEFT JOIN steps s ON s.run = m.run AND s.rank = m.rank AND s.step = m.step;
)sql";

Status create_v2(sqlite3* db) {
  if (Status s = sql::exec(db, kTablesV2); !s) return s;
  if (Status s = sql::exec(db,
                           "ALTER TABLE runs ADD COLUMN origin TEXT NOT NULL DEFAULT '';"
                           "ALTER TABLE runs ADD COLUMN world INTEGER NOT NULL DEFAULT 0;"
                           "ALTER TABLE runs ADD COLUMN ended REAL;"
                           "ALTER TABLE ranks2 RENAME TO ranks;"
                           "ALTER TABLE metrics2 RENAME TO metrics;");
      !s)
    return s;
  if (Status s = sql::exec(db, kViewsV2); !s) return s;
  return sql::exec(db, "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);"
                       "DELETE FROM schema_version; INSERT INTO schema_version VALUES (2);");
}

// v1 -> v2: move the v1 tables aside, create v2, copy runs/ranks/events/points, derive steps
// (time per step; tokens = running sum of the "tokens" series per rank). The chart buckets are
// rebuilt by the caller (RunStore::rebuild_derived) for every run.
Status migrate_v1_to_v2(sqlite3* db) {
  if (Status s = sql::exec(db,
                           "ALTER TABLE ranks RENAME TO ranks_v1;"
                           "ALTER TABLE metrics RENAME TO metrics_v1;"
                           "ALTER TABLE events RENAME TO events_v1;");
      !s)
    return s;
  if (Status s = create_v2(db); !s) return s;
  return sql::exec(db, R"sql(
INSERT INTO ranks(run, rank, node, host, pid) SELECT run, rank, node, host, pid FROM ranks_v1;
INSERT INTO events(id, run, time, level, text) SELECT id, run, time, level, text FROM events_v1;
INSERT OR IGNORE INTO keys(name) SELECT DISTINCT key FROM metrics_v1 ORDER BY key;
INSERT OR IGNORE INTO metrics(run, key, rank, step, value)
  SELECT m.run, k.id, m.rank, m.step, m.value FROM metrics_v1 m JOIN keys k ON k.name = m.key;
INSERT OR IGNORE INTO steps(run, rank, step, time, tokens)
  SELECT run, rank, step, max(coalesce(time, 0)), 0 FROM metrics_v1 GROUP BY run, rank, step;
UPDATE steps SET tokens = (SELECT c.cum FROM (
    SELECT run, rank, step, sum(value) OVER (PARTITION BY run, rank ORDER BY step) AS cum
    FROM metrics_v1 WHERE key = 'tokens') c
  WHERE c.run = steps.run AND c.rank = steps.rank AND c.step = steps.step)
  WHERE EXISTS (SELECT 1 FROM metrics_v1 t WHERE t.key = 'tokens' AND t.run = steps.run
    AND t.rank = steps.rank AND t.step = steps.step);
DROP TABLE metrics_v1; DROP TABLE ranks_v1; DROP TABLE events_v1;
)sql");
}

// Version 3: one `steps` row per (run, rank, step) carries the 15 values of the step record
// (v_<key> columns, bit i of `present` per point), instead of 15 rows in `metrics`: ingest
// writes 1 row per step instead of 16 and a chart's raw range is one range scan that has the
// x values at hand. `metrics` becomes a view with the same columns as the v2 table (key ids,
// NULL for NaN), so SQL written against v2 keeps working; keys with no column (a migrated v1
// database may have any) are rows of `metrics_extra`.
std::string steps_v3_sql() {
  std::string sql = "CREATE TABLE steps(run INTEGER NOT NULL, rank INTEGER NOT NULL,"
                    " step INTEGER NOT NULL, time REAL NOT NULL, tokens REAL NOT NULL,"
                    " present INTEGER NOT NULL DEFAULT 0";
  for (const std::string& c : value_columns()) sql += ", " + c + " REAL";
  return sql + ", PRIMARY KEY(run, rank, step)) WITHOUT ROWID;";
}

std::string views_v3_sql() {
  std::string value = "CASE k.col";
  for (size_t i = 0; i < value_columns().size(); ++i)
    value += " WHEN " + std::to_string(i) + " THEN s." + value_columns()[i];
  value += " END";
  return "CREATE VIEW metrics(run, key, rank, step, value) AS"
         " SELECT s.run, k.id, s.rank, s.step, " + value + " FROM steps s"
         " JOIN keys k ON k.col IS NOT NULL AND (s.present >> k.col) & 1"
         " UNION ALL SELECT run, key, rank, step, value FROM metrics_extra;"
         "CREATE VIEW summary AS SELECT b.run, k.name AS key, b.rank, b.n, b.lo_v AS min,"
         " b.hi_v AS max, b.la_v AS final, b.la_step AS final_step FROM buckets b"
         " JOIN keys k ON k.id = b.key WHERE b.level = 0;"
         "CREATE VIEW metrics_v AS SELECT m.run, m.rank, m.step, s.time, s.tokens,"
         " k.name AS key, m.value FROM metrics m JOIN keys k ON k.id = m.key"
         " LEFT JOIN steps s ON s.run = m.run AND s.rank = m.rank AND s.step = m.step;";
}

// v2 -> v3: the step series' keys get their column index (keys.col), every v2 point moves into
// its step's row (a point without a step row gets one with time and tokens 0: nothing is
// dropped), points of other keys into metrics_extra. Key ids and the chart buckets stay as they
// are (same points, same ids).
Status migrate_v2_to_v3(sqlite3* db) {
  std::string sql =
      "DROP VIEW IF EXISTS summary; DROP VIEW IF EXISTS metrics_v;"
      "ALTER TABLE steps RENAME TO steps_v2; ALTER TABLE metrics RENAME TO metrics_v2;"
      "ALTER TABLE keys ADD COLUMN col INTEGER;";
  const std::vector<std::string>& keys = step_series_keys();
  for (size_t i = 0; i < keys.size(); ++i)
    sql += "INSERT OR IGNORE INTO keys(name) VALUES ('" + keys[i] + "');"
           "UPDATE keys SET col = " + std::to_string(i) + " WHERE name = '" + keys[i] + "';";
  sql += steps_v3_sql();
  sql += "CREATE TABLE metrics_extra(run INTEGER NOT NULL, key INTEGER NOT NULL,"
         " rank INTEGER NOT NULL, step INTEGER NOT NULL, value REAL,"
         " PRIMARY KEY(run, key, rank, step)) WITHOUT ROWID;";
  std::string cols, pivot;
  for (size_t i = 0; i < value_columns().size(); ++i) {
    cols += ", " + value_columns()[i];
    pivot += ", max(CASE WHEN k.col = " + std::to_string(i) + " THEN m.value END)";
  }
  sql += "INSERT INTO steps(run, rank, step, time, tokens, present" + cols + ")"
         " SELECT m.run, m.rank, m.step, coalesce(s.time, 0), coalesce(s.tokens, 0),"
         " sum(CASE WHEN k.col IS NULL THEN 0 ELSE 1 << k.col END)" + pivot +
         " FROM metrics_v2 m JOIN keys k ON k.id = m.key LEFT JOIN steps_v2 s ON s.run = m.run"
         " AND s.rank = m.rank AND s.step = m.step GROUP BY m.run, m.rank, m.step;"
         "INSERT OR IGNORE INTO steps(run, rank, step, time, tokens)"
         " SELECT run, rank, step, time, tokens FROM steps_v2;"
         "INSERT INTO metrics_extra(run, key, rank, step, value) SELECT m.run, m.key, m.rank,"
         " m.step, m.value FROM metrics_v2 m JOIN keys k ON k.id = m.key WHERE k.col IS NULL;"
         "DROP TABLE metrics_v2; DROP TABLE steps_v2;";
  sql += views_v3_sql();
  sql += "DELETE FROM schema_version; INSERT INTO schema_version VALUES (3);";
  return sql::exec(db, sql);
}

// v3 -> v4: the cross-rank aggregates and per-run totals (rank_agg.h). Both are
// derived: the caller fills them (RunStore::rebuild_derived) for every run in the same
// transaction, as it rebuilds the chart buckets.
Status migrate_v3_to_v4(sqlite3* db) {
  std::string sql = kRankAggTablesSql;
  sql += "DELETE FROM schema_version; INSERT INTO schema_version VALUES (4);";
  return sql::exec(db, sql);
}

// Adds the `steps` columns of the step series a database lacks (appended series: every other
// column keeps its index), gives their keys their column index, makes the views that list the
// columns again and runs `more_sql` (the version's own tables) and records `version`. A
// database that reached v3 through this binary's v2 -> v3 already has every column.
Status sync_series_columns(sqlite3* db, int version, const std::string& more_sql) {
  const std::vector<std::string>& cols = value_columns();
  const std::vector<std::string>& keys = step_series_keys();
  sql::Stmt info(db, "SELECT count(*) FROM pragma_table_info('steps') WHERE name = ?1");
  std::string sql = "DROP VIEW IF EXISTS summary; DROP VIEW IF EXISTS metrics_v; DROP VIEW IF EXISTS metrics;";
  for (size_t i = 0; i < cols.size(); ++i) {
    info.bind(1, cols[i]);
    Result<bool> row = info.step();
    if (!row) return row.error();
    const bool present = info.int64(0) > 0;
    info.reset();
    if (!present) sql += "ALTER TABLE steps ADD COLUMN " + cols[i] + " REAL;";
    sql += "INSERT OR IGNORE INTO keys(name) VALUES ('" + keys[i] + "');"
           "UPDATE keys SET col = " + std::to_string(i) + " WHERE name = '" + keys[i] + "';";
  }
  sql += views_v3_sql();
  sql += more_sql;
  sql += "DELETE FROM schema_version; INSERT INTO schema_version VALUES (" + std::to_string(version) + ");";
  return sql::exec(db, sql);
}

// v4 -> v5: the fifth axis' series, comm_s.pp, gets its column (series 15).
Status migrate_v4_to_v5(sqlite3* db) { return sync_series_columns(db, 5, ""); }

// Version 6: mixtures of experts. comm_s.ep, the experts' all-to-all, is series 16 like every
// axis's time. The routing of a step (core/metrics.h MoeStepMetrics) is the same in every rank's
// record, so it is stored once per step, not per rank: the aux loss in moe_steps, and per sparse
// layer the tokens each expert received as one blob (expert_load.h: float64 per expert), keyed
// (run, layer, step) so that one layer's heat map is one range scan. 1,024 ranks of a model with
// 128 experts in 48 layers store 48 rows of 1 KiB per step, as 1 rank would.
const char* const kMoeTablesV6 = R"sql(
CREATE TABLE IF NOT EXISTS moe_steps(run INTEGER NOT NULL, step INTEGER NOT NULL, aux_loss REAL,
  PRIMARY KEY(run, step)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS expert_load(run INTEGER NOT NULL, layer INTEGER NOT NULL,
  step INTEGER NOT NULL, experts INTEGER NOT NULL, tokens BLOB NOT NULL,
  PRIMARY KEY(run, layer, step)) WITHOUT ROWID;
)sql";

// v5 -> v6: the comm_s.ep column and the two tables; every stored row stays as it is (no stored
// run has either: nothing derived changes).
Status migrate_v5_to_v6(sqlite3* db) { return sync_series_columns(db, 6, kMoeTablesV6); }

// v6 -> v7: the step's CPU time, cpu_s, gets its column (series 17): with the waits, it tells a
// rank that was not running from the peers waiting on it (core/hang_diagnosis.h).
Status migrate_v6_to_v7(sqlite3* db) { return sync_series_columns(db, 7, ""); }

}  // namespace

const std::vector<std::string>& value_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> out;
    for (std::string k : step_series_keys()) {
      for (char& c : k)
        if (c == '.') c = '_';
      out.push_back("v_" + k);
    }
    return out;
  }();
  return cols;
}

Result<int> read_schema_version(sqlite3* db) {
  sql::Stmt has(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'");
  Result<bool> row = has.step();
  if (!row) return row.error();
  if (has.int64(0) == 0) {
    sql::Stmt any(db, "SELECT count(*) FROM sqlite_master");
    if (Result<bool> r = any.step(); !r) return r.error();
    if (any.int64(0) != 0)
      return Error{"database", "schema", "is not a Meshwork run store (no schema_version table)"}.as(ErrorKind::io);
    return 0;
  }
  sql::Stmt v(db, "SELECT max(version) FROM schema_version");
  if (Result<bool> r = v.step(); !r) return r.error();
  return static_cast<int>(v.int64(0));
}

Status ensure_schema(sqlite3* db, const std::function<Status()>& after_migration) {
  Result<int> version = read_schema_version(db);
  if (!version) return version.error();
  if (*version == kSchemaVersion) return Status::Ok();
  if (*version > kSchemaVersion)
    return Error{"database", "schema version " + std::to_string(*version),
                 "this Meshwork reads versions up to " + std::to_string(kSchemaVersion) +
                     "; open it with a newer Meshwork"}.as(ErrorKind::io);
  sql::Transaction tx(db);
  if (!tx.begun()) return tx.begun();
  // Re-read inside the write lock: another process may have created or migrated it meanwhile
  // (then there is nothing left to do here).
  version = read_schema_version(db);
  if (!version) return version.error();
  if (*version == kSchemaVersion) return tx.commit();
  if (*version > kSchemaVersion)
    return Error{"database", "schema version " + std::to_string(*version),
                 "this Meshwork reads versions up to " + std::to_string(kSchemaVersion) +
                     "; open it with a newer Meshwork"}.as(ErrorKind::io);
  // Every database takes the same path: fresh ones are created as version 2 and migrated.
  if (*version == 0)
    if (Status s = create_v2(db); !s) return s;
  if (*version == 1)
    if (Status s = migrate_v1_to_v2(db); !s) return s;
  if (*version <= 2)
    if (Status s = migrate_v2_to_v3(db); !s) return s;
  if (*version <= 3)
    if (Status s = migrate_v3_to_v4(db); !s) return s;
  if (*version <= 4)
    if (Status s = migrate_v4_to_v5(db); !s) return s;
  if (*version <= 5)
    if (Status s = migrate_v5_to_v6(db); !s) return s;
  if (Status s = migrate_v6_to_v7(db); !s) return s;
  // Derived tables of every stored run: buckets (from v1), aggregates and totals (before v4).
  // v5, v6 and v7 add series no stored run has: nothing derived changes.
  if (*version >= 1 && *version <= 3 && after_migration)
    if (Status s = after_migration(); !s) return s;
  return tx.commit();
}

}  // namespace meshwork::store
