#include "web/sessions.h"

#include <algorithm>

#include "web/access.h"

namespace meshwork::web {

Result<std::string> Sessions::open() {
  auto id = random_hex(32);
  if (!id) return id.error();
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(sessions_, [&](const Session& s) { return now - s.opened > lifetime_; });
  if (sessions_.size() >= kMaxSessions) sessions_.erase(sessions_.begin());
  sessions_.push_back({*id, now});
  return *id;
}

bool Sessions::valid(std::string_view id) const {
  const auto now = std::chrono::steady_clock::now();
  bool found = false;
  // Every entry is compared, whatever matched: how long a wrong id takes says nothing.
  for (const Session& s : sessions_) found |= same_secret(s.id, id) && now - s.opened <= lifetime_;
  return found;
}

}  // namespace meshwork::web
