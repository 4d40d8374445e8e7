#include "core/store/calibration_store.h"

#include "core/store/sqlite.h"

namespace meshwork::store {

Status ensure_calibration_tables(sqlite3* db) {
  return sql::exec(db,
                   "CREATE TABLE IF NOT EXISTS calibrations(id INTEGER PRIMARY KEY,"
                   " fingerprint TEXT NOT NULL, measured_at TEXT NOT NULL, run INTEGER, json TEXT NOT NULL);"
                   "CREATE INDEX IF NOT EXISTS calibrations_fingerprint ON calibrations(fingerprint, id);"
                   "CREATE TABLE IF NOT EXISTS calibration_records(run INTEGER NOT NULL, rank INTEGER NOT NULL,"
                   " line TEXT NOT NULL);"
                   "CREATE INDEX IF NOT EXISTS calibration_records_run ON calibration_records(run);");
}

Status store_calibration_record(sqlite3* db, RunId run, const CalibrationRecord& record) {
  if (Status s = ensure_calibration_tables(db); !s) return s;
  sql::Stmt put(db, "INSERT INTO calibration_records(run, rank, line) VALUES (?1, ?2, ?3)");
  if (!put.ok()) return put.error();
  return put.bind(1, run).bind(2, record.rank).bind(3, to_json_line(record)).run();
}

Result<std::vector<CalibrationRecord>> calibration_records(RunStore& store, RunId run) {
  sqlite3* db = store.handle();
  if (Status s = ensure_calibration_tables(db); !s) return s.error();
  sql::Stmt get(db, "SELECT line FROM calibration_records WHERE run = ?1 ORDER BY rowid");
  if (!get.ok()) return get.error();
  get.bind(1, run);
  std::vector<CalibrationRecord> out;
  Status s = get.each_row([&] {
    auto rec = parse_metrics_line(get.text(0));
    if (rec && std::holds_alternative<CalibrationRecord>(*rec)) out.push_back(std::get<CalibrationRecord>(*rec));
  });
  if (!s) return s.error();
  return out;
}

Result<int64_t> save_calibration(RunStore& store, const Calibration& c, std::optional<RunId> run) {
  sqlite3* db = store.handle();
  if (Status s = ensure_calibration_tables(db); !s) return s.error();
  sql::Stmt put(db, "INSERT INTO calibrations(fingerprint, measured_at, run, json) VALUES (?1, ?2, ?3, ?4)");
  if (!put.ok()) return put.error();
  put.bind(1, c.fingerprint.id()).bind(2, c.measured_at).bind(4, to_json(c).dump());
  if (run) put.bind(3, *run);
  else put.bind_null(3);
  if (Status s = put.run(); !s) return s.error();
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db));
}

namespace {

bool has_calibrations_table(sqlite3* db) {
  sql::Stmt t(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'calibrations'");
  bool found = false;
  if (t.ok()) (void)t.each_row([&] { found = true; });
  return found;
}

Result<std::vector<StoredCalibration>> query(sqlite3* db, const std::string& where, const std::string& arg) {
  // A read-only connection (meshwork serve) cannot create the tables; a store that never had a
  // calibration then simply holds none.
  if (sqlite3_db_readonly(db, "main") == 1 && !has_calibrations_table(db)) return std::vector<StoredCalibration>();
  if (Status s = ensure_calibration_tables(db); !s) return s.error();
  sql::Stmt get(db, "SELECT id, run, json FROM calibrations " + where + " ORDER BY id DESC");
  if (!get.ok()) return get.error();
  if (!arg.empty()) get.bind(1, arg);
  std::vector<StoredCalibration> out;
  Status s = get.each_row([&]() -> Status {
    StoredCalibration sc;
    sc.id = get.int64(0);
    if (sqlite3_column_type(get.raw(), 1) != SQLITE_NULL) sc.run = get.int64(1);
    nlohmann::json j = nlohmann::json::parse(get.text(2), nullptr, false);
    auto c = calibration_from_json(j);
    if (!c) return Error{"calibrations", "id " + std::to_string(sc.id), "a stored calibration: " + c.error().message()}.as(ErrorKind::io);
    sc.calibration = std::move(*c);
    out.push_back(std::move(sc));
    return Status::Ok();
  });
  if (!s) return s.error();
  return out;
}

}  // namespace

Result<std::optional<StoredCalibration>> latest_calibration(RunStore& store, const std::string& id_prefix) {
  sqlite3* db = store.handle();
  if (id_prefix.size() < 4 || id_prefix.size() > 16 ||
      id_prefix.find_first_not_of("0123456789abcdef") != std::string::npos)
    return Error{"--calibration", id_prefix, "a fingerprint id: 4 to 16 lowercase hex digits (meshwork calibrate prints it)"};
  auto rows = query(db, "WHERE substr(fingerprint, 1, length(?1)) = ?1", id_prefix);
  if (!rows) return rows.error();
  if (rows->empty()) return std::optional<StoredCalibration>();
  const std::string first = rows->front().calibration.fingerprint.id();
  for (const StoredCalibration& sc : *rows)
    if (sc.calibration.fingerprint.id() != first)
      return Error{"--calibration", id_prefix, "names several fingerprints; give more hex digits"};
  return std::optional<StoredCalibration>(std::move(rows->front()));
}

Result<std::vector<StoredCalibration>> list_calibrations(RunStore& store) { return query(store.handle(), "", ""); }

}  // namespace meshwork::store
