// What every fuzz target shares: an invariant check that stops the process loudly (libFuzzer
// then saves the input as a crash), and the rule that a refused input explains itself.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"

#define FUZZ_CHECK(cond, what)                                                  \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "fuzz invariant broken at %s:%d: %s\n", __FILE__,    \
                   __LINE__, std::string(what).c_str());                        \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

namespace meshwork::fuzz {

// A refusal is fine; a refusal without words is not (users see the message, never a code).
inline void check_refusal(const Error& error, std::string_view parser) {
  FUZZ_CHECK(!error.field.empty() && !error.message().empty(),
             std::string(parser) + " refused an input without naming what: '" + error.message() + "'");
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace meshwork::fuzz
