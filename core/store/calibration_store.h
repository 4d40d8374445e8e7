// Calibrations in the run store (core/calibration.h), keyed by cluster fingerprint, and the raw
// calibration records of the run that measured them (ingested like any metrics line).
//
// Schema (its own migration step, applied by ensure_calibration_tables() on first use and by
// the ingester; idempotent, independent of schema_version so it merges with other migrations):
//   calibrations(id INTEGER PRIMARY KEY, fingerprint TEXT, measured_at TEXT, run INTEGER,
//                json TEXT)              one fitted Calibration (to_json) per row
//   calibration_records(run, rank, line) the "calibration" metrics lines of a run, as written
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sqlite3.h>

#include "core/calibration.h"
#include "core/metrics.h"
#include "core/store/run_store.h"

namespace meshwork::store {

Status ensure_calibration_tables(sqlite3* db);

// The ingester's hook: keeps one calibration record of `run`.
Status store_calibration_record(sqlite3* db, RunId run, const CalibrationRecord& record);
// Every calibration record of `run`, in the order they were ingested.
Result<std::vector<CalibrationRecord>> calibration_records(RunStore& store, RunId run);

struct StoredCalibration {
  int64_t id = 0;
  std::optional<RunId> run;  // the run that measured it (none: imported from a file)
  Calibration calibration;
};
// Saves `c` (a new row; older ones of the same fingerprint stay, the newest wins).
Result<int64_t> save_calibration(RunStore& store, const Calibration& c, std::optional<RunId> run = std::nullopt);
// The newest calibration whose fingerprint id starts with `id_prefix` (the whole id, or at
// least 4 of its hex digits); none when there is none. An Error when the prefix is too short or
// names several fingerprints.
Result<std::optional<StoredCalibration>> latest_calibration(RunStore& store, const std::string& id_prefix);
// Every stored calibration, newest first.
Result<std::vector<StoredCalibration>> list_calibrations(RunStore& store);

}  // namespace meshwork::store
