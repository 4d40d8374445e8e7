// Browser sessions of one `meshwork serve` instance. The one-time login link opens a session: a
// random id (32 bytes from the kernel's CSPRNG, hex) that the browser keeps in a cookie for
// kSessionLifetime. Sessions live only in this process's memory, so stopping the server revokes
// every one of them; the token file stays the long-lived secret and never sits in a cookie.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork::web {

inline constexpr std::chrono::hours kSessionLifetime{12};
// More than anyone opens by hand from printed one-time links; the oldest goes first beyond it.
inline constexpr size_t kMaxSessions = 256;

class Sessions {
 public:
  explicit Sessions(std::chrono::seconds lifetime = kSessionLifetime) : lifetime_(lifetime) {}

  // A new session id (64 hex digits).
  Result<std::string> open();
  // Known to this instance and younger than the lifetime; compared in constant time.
  bool valid(std::string_view id) const;
  std::chrono::seconds lifetime() const { return lifetime_; }
  size_t size() const { return sessions_.size(); }

 private:
  struct Session {
    std::string id;
    std::chrono::steady_clock::time_point opened;
  };
  std::chrono::seconds lifetime_;
  std::vector<Session> sessions_;  // oldest first
};

}  // namespace meshwork::web
