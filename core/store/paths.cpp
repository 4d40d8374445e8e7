#include "core/store/paths.h"

#include <cstdlib>

namespace meshwork::store {

std::filesystem::path default_db_path() {
  // XDG Base Directory: $XDG_DATA_HOME if set and absolute, else $HOME/.local/share.
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && xdg[0] == '/')
    return std::filesystem::path(xdg) / "meshwork" / "runs.db";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && home[0] ? home : ".") / ".local" / "share" / "meshwork" /
         "runs.db";
}

}  // namespace meshwork::store
