#include "core/store/sqlite.h"

#include <utility>

namespace meshwork::store::sql {

Error db_error(sqlite3* db, std::string_view what) {
  std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
  return Error{"database", std::string(what.substr(0, 120)), msg}.as(ErrorKind::io);
}

Status exec(sqlite3* db, std::string_view sql) {
  char* err = nullptr;
  const std::string text(sql);
  if (sqlite3_exec(db, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const Error e = Error{"database", text.substr(0, 120), err ? err : sqlite3_errmsg(db)}.as(ErrorKind::io);
    sqlite3_free(err);
    return e;
  }
  return Status::Ok();
}

Stmt::Stmt(sqlite3* db, std::string_view sql) : db_(db), sql_(sql) {
  if (sqlite3_prepare_v3(db, sql_.data(), static_cast<int>(sql_.size()), SQLITE_PREPARE_PERSISTENT,
                         &stmt_, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
  }
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt::Stmt(Stmt&& o) noexcept
    : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)), sql_(std::move(o.sql_)) {}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(stmt_);
    db_ = o.db_;
    stmt_ = std::exchange(o.stmt_, nullptr);
    sql_ = std::move(o.sql_);
  }
  return *this;
}

Error Stmt::error() const { return db_error(db_, sql_); }

Result<bool> Stmt::step() {
  if (!stmt_) return error();
  const int rc = sqlite3_step(stmt_);
  last_code_ = rc;
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    sqlite3_reset(stmt_);
    return false;
  }
  Error e = error();
  sqlite3_reset(stmt_);
  return e;
}

Status Stmt::run() {
  for (;;) {
    Result<bool> r = step();
    if (!r) return r.error();
    if (!*r) return Status::Ok();
  }
}

Transaction::Transaction(sqlite3* db) : db_(db) {
  begun_ = exec(db_, "BEGIN IMMEDIATE");
  open_ = begun_.ok();
}

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

Status Transaction::commit() {
  if (!open_) return begun_.ok() ? Status(Error{"database", "COMMIT", "no open transaction"}.as(ErrorKind::internal)) : begun_;
  Status s = exec(db_, "COMMIT");
  if (s) open_ = false;
  return s;
}

}  // namespace meshwork::store::sql
