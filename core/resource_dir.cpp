#include "core/resource_dir.h"

#include <cstdlib>
#include <system_error>

namespace meshwork {

namespace fs = std::filesystem;

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

fs::path resource_dir() {
  if (const char* env = std::getenv("MESHWORK_RESOURCE_DIR"); env && *env) return fs::path(env);
  std::error_code ec;
  const fs::path exe = executable_dir();
  const fs::path installed = exe.empty() ? fs::path() : (exe.parent_path() / "share" / "meshwork").lexically_normal();
  if (!installed.empty() && fs::is_directory(installed, ec)) return installed;
#ifdef MESHWORK_RESOURCE_DIR
  return fs::path(MESHWORK_RESOURCE_DIR);
#else
  return installed;
#endif
}

fs::path docs_dir() {
  std::error_code ec;
  const fs::path exe = executable_dir();
  const fs::path installed = exe.empty() ? fs::path() : (exe.parent_path() / "share" / "doc" / "meshwork").lexically_normal();
  if (!installed.empty() && fs::is_directory(installed, ec)) return installed;
#ifdef MESHWORK_RESOURCE_DIR
  return fs::path(MESHWORK_RESOURCE_DIR).parent_path();
#else
  return installed;
#endif
}

}  // namespace meshwork
