// Schema of the run store and its migrations. Version 1 was the first, plain layout (metrics with
// text keys and a time per point); version 2 is the compact layout described in docs/store.md.
// open() migrates older databases in one transaction, keeping every run and point.
#pragma once

#include <functional>

#include <sqlite3.h>

#include "core/error.h"

namespace meshwork::store {

inline constexpr int kSchemaVersion = 2;

// The version-1 layout, kept verbatim so tests can build an old database and migrate it.
extern const char* const kSchemaV1;

// Reads the stored version (0 for an empty database).
Result<int> read_schema_version(sqlite3* db);
// Creates the current schema on an empty database or migrates an older one; an Error for a
// database written by a newer Meshwork (never touched).
// `after_migration` runs inside the migration's transaction (to rebuild derived tables).
Status ensure_schema(sqlite3* db, const std::function<Status()>& after_migration);

}  // namespace meshwork::store
