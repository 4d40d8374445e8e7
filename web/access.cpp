#include "web/access.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace meshwork::web {

namespace fs = std::filesystem;

namespace {

bool is_token(std::string_view t) {
  return t.size() == 64 && std::all_of(t.begin(), t.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

fs::path default_token_path() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return fs::path(xdg) / "meshwork" / "web-token";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".config" / "meshwork" / "web-token";
}

Result<std::string> random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) return Error{"getrandom", "", "the kernel gave no random bytes"}.as(ErrorKind::internal);
    got += static_cast<size_t>(n);
  }
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Access Access::open() { return Access{}; }

Result<Access> Access::with_token(const fs::path& path, bool* created) {
  if (created) *created = false;
  Access a;
  a.required_ = true;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if ((st.st_mode & 077) != 0)
      return Error{path.string(), "", "others may read this token file: chmod 600 it (or delete it for a new token)"}
          .as(ErrorKind::io);
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    const std::string_view t = trim(line);
    if (!is_token(t))
      return Error{path.string(), "", "holds no token (64 hex digits): delete it and a new one is made"}.as(ErrorKind::io);
    a.token_ = std::string(t);
    return a;
  }
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Error{path.parent_path().string(), "", "cannot be created: " + ec.message()}.as(ErrorKind::io);
  ::chmod(path.parent_path().c_str(), 0700);
  auto token = random_hex(32);
  if (!token) return token.error();
  // O_EXCL: two servers starting at once never both write (the loser reads the winner's).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return with_token(path, created);
    return Error{path.string(), "", "cannot be written"}.as(ErrorKind::io);
  }
  const std::string text = *token + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) return Error{path.string(), "", "cannot be written"}.as(ErrorKind::io);
  a.token_ = *token;
  if (created) *created = true;
  return a;
}

bool Access::allows(std::string_view authorization, std::string_view cookie) const {
  if (!required_) return true;
  authorization = trim(authorization);
  if (authorization.substr(0, 7) == "Bearer " && same_secret(trim(authorization.substr(7)), token_)) return true;
  // Cookie: a=b; meshwork_session_8765=...; c=d
  while (!cookie.empty()) {
    const size_t semi = cookie.find(';');
    const std::string_view pair = trim(cookie.substr(0, semi));
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == cookie_name_ &&
        sessions_.valid(pair.substr(eq + 1)))
      return true;
    if (semi == std::string_view::npos) break;
    cookie.remove_prefix(semi + 1);
  }
  return false;
}

void Access::set_port(quint16 port) { cookie_name_ = std::string(kSessionCookiePrefix) + std::to_string(port); }

Result<std::string> Access::log_in(std::string_view code) {
  if (!redeem(code))
    return Error{"code", "", "not a login code, used already, or older than 10 minutes: restart `meshwork serve` for a new link"};
  return sessions_.open();
}

Result<std::string> Access::new_login_code() {
  auto code = random_hex(16);
  if (!code) return code.error();
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(codes_, [&](const auto& c) { return now - c.second > kLoginCodeLifetime; });
  codes_[*code] = now;
  return *code;
}

bool Access::redeem(std::string_view code) {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = codes_.begin(); it != codes_.end(); ++it) {
    if (!same_secret(it->first, code)) continue;
    const bool fresh = now - it->second <= kLoginCodeLifetime;
    codes_.erase(it);  // once, fresh or not
    return fresh;
  }
  return false;
}

}  // namespace meshwork::web
