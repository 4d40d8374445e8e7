// The version and the commit a binary was built from, for `--version`, the workbench's About box
// and the stored run records. Defined in a file generated at every build
// (cmake/MeshworkBuildInfo.cmake), so a new commit recompiles one file and relinks, and no header
// that many files include carries the commit.
#pragma once

#include <string>

namespace meshwork {

const char* build_version();  // the project's version: "0.1.0"
const char* build_commit();   // 12 hex digits, "+dirty" when built with local changes; "unknown" outside git

// "meshwork 0.1.0 (commit 4cfe3b7a1b2c)": the first line of `--version`.
inline std::string version_line(const std::string& program) {
  return program + " " + build_version() + " (commit " + build_commit() + ")";
}

}  // namespace meshwork
