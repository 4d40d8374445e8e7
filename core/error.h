// Errors returned as values at the boundaries (LevelDB style). Every user-facing error names the
// field, the offending value and what is allowed, so the CLI can print
//   meshwork: <field>: <value>: <what is allowed>
// and the GUI can put the same words next to the control for <field>.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace meshwork {

// What went wrong, as LevelDB's Status carries a code: each boundary (meshwork's and meshtrain's
// exit codes, the workbench's message boxes) maps kinds to what it shows in one place
// (exit_code() below; ui/error_text.h), never by looking at the words.
enum class ErrorKind {
  invalid_input,  // the user's input breaks a rule: fix the input (exit 2)
  does_not_fit,   // valid, but the run does not fit or did not succeed (exit 3)
  io,             // a file or the store could not be read or written (exit 1)
  remote,         // a node could not be reached or answered wrongly (exit 1)
  internal,       // a bug or an unexpected state (exit 1)
};
std::string_view to_string(ErrorKind kind);

// Process exit codes shared by `meshwork` and `meshtrain`: 0 success, 2 invalid input, 3 valid
// but does not fit / the run failed, 1 everything else.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitInvalid = 2;
inline constexpr int kExitNoFit = 3;
int exit_code(ErrorKind kind);

struct Error {
  std::string field;    // e.g. "tp", "model.num_attention_heads", "--gpu-memory"
  std::string value;    // the offending value as the user wrote it
  std::string allowed;  // what would be accepted, in plain words
  ErrorKind kind = ErrorKind::invalid_input;

  // The same error with another kind: `return Error{path, "", "cannot be read"}.as(ErrorKind::io);`
  Error as(ErrorKind k) const& {
    Error e = *this;
    e.kind = k;
    return e;
  }

  std::string message() const {
    std::string out = field;
    if (!value.empty()) out += ": " + value;
    if (!allowed.empty()) out += ": " + allowed;
    return out;
  }
};

// Result<T>: either a value or an Error. A small stand-in for std::expected (C++23).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}          // NOLINT(implicit)
  Result(Error error) : data_(std::move(error)) {}      // NOLINT(implicit)

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(data_); }
  T& value() & { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<Error>(data_); }

 private:
  std::variant<T, Error> data_;
};

// Status: success or an Error, for operations with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT(implicit)
  static Status Ok() { return {}; }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

}  // namespace meshwork
