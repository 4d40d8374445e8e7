#include "core/error.h"

namespace meshwork {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_input: return "invalid input";
    case ErrorKind::does_not_fit: return "does not fit";
    case ErrorKind::io: return "I/O error";
    case ErrorKind::remote: return "remote error";
    case ErrorKind::internal: return "internal error";
  }
  return "error";
}

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_input: return kExitInvalid;
    case ErrorKind::does_not_fit: return kExitNoFit;
    case ErrorKind::io:
    case ErrorKind::remote:
    case ErrorKind::internal: return kExitError;
  }
  return kExitError;
}

}  // namespace meshwork
