// Thin RAII helpers over the SQLite C API, internal to the store. Every failure becomes an
// Error{"database", <path or statement>, <sqlite message>} so callers return it as a value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sqlite3.h>

#include "core/error.h"

namespace meshwork::store::sql {

Error db_error(sqlite3* db, std::string_view what);

// Runs one or more statements without results.
Status exec(sqlite3* db, std::string_view sql);

// A prepared statement. bind*() indexes start at 1; column*() at 0.
class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3* db, std::string_view sql);  // check ok() / error()
  ~Stmt();
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  Error error() const;

  Stmt& bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); return *this; }
  Stmt& bind(int i, int v) { sqlite3_bind_int64(stmt_, i, v); return *this; }
  Stmt& bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); return *this; }
  Stmt& bind(int i, std::string_view v) {  // never NULL: an empty view binds ''
    sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()),
                      SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind_static(int i, std::string_view v) {  // v must outlive the next step()
    sqlite3_bind_text(stmt_, i, v.data() ? v.data() : "", static_cast<int>(v.size()),
                      SQLITE_STATIC);
    return *this;
  }
  Stmt& bind_null(int i) { sqlite3_bind_null(stmt_, i); return *this; }

  // SQLITE_ROW -> true; SQLITE_DONE -> false (and the statement is reset); errors -> Error.
  Result<bool> step();
  // Steps to completion, for statements without rows.
  Status run();
  // Steps through every row, calling on_row() at each (it reads this statement's columns).
  // An on_row() that returns a Status stops the walk at its first error and returns it.
  template <class F>
  Status each_row(F&& on_row) {
    for (;;) {
      Result<bool> row = step();
      if (!row) return row.error();
      if (!*row) return Status::Ok();
      if constexpr (std::is_same_v<std::invoke_result_t<F&>, Status>) {
        if (Status s = on_row(); !s) return s;
      } else {
        on_row();
      }
    }
  }
  // The first row made into a value by row_value(), or none; the statement is reset either way.
  template <class F>
  auto first(F&& row_value) -> Result<std::optional<std::invoke_result_t<F&>>> {
    using Value = std::optional<std::invoke_result_t<F&>>;
    Result<bool> row = step();
    if (!row) return row.error();
    if (!*row) return Value();  // step() has reset it
    Value value = row_value();
    reset();
    return value;
  }
  // Every row made into a value by row_value(), in order.
  template <class F>
  auto collect(F&& row_value) -> Result<std::vector<std::invoke_result_t<F&>>> {
    std::vector<std::invoke_result_t<F&>> out;
    if (Status s = each_row([&] { out.push_back(row_value()); }); !s) return s.error();
    return out;
  }
  void reset() { sqlite3_reset(stmt_); sqlite3_clear_bindings(stmt_); }

  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  sqlite3_stmt* raw() { return stmt_; }
  int last_code() const { return last_code_; }  // SQLite result code of the last step()

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
  int last_code_ = SQLITE_OK;
};

// Scoped transaction: BEGIN IMMEDIATE on construction, ROLLBACK unless commit() succeeded.
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  const Status& begun() const { return begun_; }
  Status commit();

 private:
  sqlite3* db_;
  Status begun_;
  bool open_ = false;
};

}  // namespace meshwork::store::sql
