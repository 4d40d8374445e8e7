// core/resource_dir.h and core/build_info.h: where every binary finds its resources and docs,
// and what `--version` says. The installed layout itself (bin/ beside share/meshwork) is run
// end to end by tests/package/install_tree_test.sh.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "core/build_info.h"
#include "core/resource_dir.h"

namespace fs = std::filesystem;
using namespace meshwork;

namespace {

struct UnsetResourceEnv {
  UnsetResourceEnv() { unsetenv("MESHWORK_RESOURCE_DIR"); }
  ~UnsetResourceEnv() { unsetenv("MESHWORK_RESOURCE_DIR"); }
};

}  // namespace

TEST(ResourceDir, TheEnvironmentWinsEvenWhenTheFolderIsMissing) {
  UnsetResourceEnv clean;
  setenv("MESHWORK_RESOURCE_DIR", "/nonexistent/meshwork-share", 1);
  EXPECT_EQ(resource_dir(), fs::path("/nonexistent/meshwork-share"));
}

TEST(ResourceDir, FromTheBuildTreeItIsTheSourceTreesResources) {
  UnsetResourceEnv clean;
  // build/bin/../share/meshwork does not exist, so the source tree's resources/ is used.
  ASSERT_FALSE(fs::exists(executable_dir().parent_path() / "share" / "meshwork"));
  const fs::path dir = resource_dir();
  EXPECT_TRUE(fs::exists(dir / "models" / "tiny.json")) << dir;
  EXPECT_TRUE(fs::exists(dir / "data" / "kjv.bin")) << dir;
  EXPECT_TRUE(fs::exists(dir / "python" / "meshwork_tokenize.py")) << dir;
  EXPECT_TRUE(fs::exists(docs_dir() / "README.md")) << docs_dir();
  EXPECT_TRUE(fs::exists(docs_dir() / "docs" / "design.md")) << docs_dir();
}

TEST(ResourceDir, ExecutableDirIsThisTestsFolder) {
  const fs::path dir = executable_dir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(dir / "core_tests"));
}

TEST(BuildInfo, VersionLineNamesTheVersionAndTheCommit) {
  EXPECT_EQ(std::string(build_version()), MESHWORK_VERSION);
  const std::string commit = build_commit();
  // A git checkout: 12 hex digits (+dirty with local changes); else "unknown"; or what
  // MESHWORK_COMMIT said at build time (not set by the tests' build).
  EXPECT_TRUE(std::regex_match(commit, std::regex("[0-9a-f]{12}(\\+dirty)?|unknown"))) << commit;
  EXPECT_EQ(version_line("meshwork"), std::string("meshwork ") + MESHWORK_VERSION + " (commit " + commit + ")");
}
