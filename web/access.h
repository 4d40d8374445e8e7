// Who may read the served store (docs/web.md "Security"). A server on a loopback address serves
// whoever can open a socket on this machine, as the workbench itself does. Any other address
// needs the token: 32 random bytes (hex) kept 0600 in a file, sent by scripts as
// `Authorization: Bearer TOKEN`. A browser signs in with a one-time login link instead, which
// opens a session (web/sessions.h) kept in a cookie: the token never sits in a cookie or a URL
// that a browser's history or a proxy log would keep.
#pragma once

#include <QtGlobal>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "core/error.h"
#include "web/sessions.h"

namespace meshwork::web {

// The session cookie's name is this prefix and the server's port: browsers send a cookie to every
// port of a host name, so servers of several users on one login node must not share a name.
inline constexpr std::string_view kSessionCookiePrefix = "meshwork_session_";
inline constexpr std::chrono::minutes kLoginCodeLifetime{10};

// $XDG_CONFIG_HOME/meshwork/web-token, else ~/.config/meshwork/web-token.
std::filesystem::path default_token_path();

// Compares in time that does not depend on where the strings differ (a remote guesser learns
// nothing from how long a wrong secret takes to refuse).
bool same_secret(std::string_view a, std::string_view b);

// 2n lowercase hex digits of n bytes from the kernel's CSPRNG (getrandom).
Result<std::string> random_hex(size_t bytes);

class Access {
 public:
  // Nobody needs a token (a loopback listener).
  static Access open();
  // The token in `path`, made (0600, its folder 0700) when the file does not exist; `created`
  // tells the caller to show it once. A token file others may read, or one that holds no token,
  // is an error naming the file and the fix.
  static Result<Access> with_token(const std::filesystem::path& path, bool* created = nullptr);

  bool required() const { return required_; }
  const std::string& token() const { return token_; }

  // May this request read? Either header may be empty. The token as a Bearer header, or a
  // session of this instance in the cookie named cookie_name().
  bool allows(std::string_view authorization, std::string_view cookie) const;

  // kSessionCookiePrefix + the port (set once the server listens).
  void set_port(quint16 port);
  const std::string& cookie_name() const { return cookie_name_; }
  Sessions& sessions() { return sessions_; }

  // A code for a one-time login link; it works once, within kLoginCodeLifetime.
  Result<std::string> new_login_code();
  // Redeems a login code for a new session id; an error when the code is unknown, used or old.
  Result<std::string> log_in(std::string_view code);

 private:
  bool required_ = false;
  std::string token_;
  std::string cookie_name_ = std::string(kSessionCookiePrefix);
  Sessions sessions_;
  bool redeem(std::string_view code);
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> codes_;
};

}  // namespace meshwork::web
