// Who may read the served store (docs/web.md "Security"). A server on a loopback address serves
// whoever can open a socket on this machine, as the workbench itself does. Any other address
// needs the token: 32 random bytes (hex) kept 0600 in a file, sent as `Authorization: Bearer
// TOKEN` or as the cookie a one-time login link sets, so the token never travels in a URL that
// a browser's history or a proxy log would keep.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "core/error.h"

namespace meshwork::web {

inline constexpr std::string_view kTokenCookie = "meshwork_token";
inline constexpr std::chrono::minutes kLoginCodeLifetime{10};

// $XDG_CONFIG_HOME/meshwork/web-token, else ~/.config/meshwork/web-token.
std::filesystem::path default_token_path();

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

  // May this request read? Either header may be empty.
  bool allows(std::string_view authorization, std::string_view cookie) const;

  // A code for a one-time login link; it works once, within kLoginCodeLifetime.
  Result<std::string> new_login_code();
  bool redeem(std::string_view code);

 private:
  bool required_ = false;
  std::string token_;
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> codes_;
};

}  // namespace meshwork::web
