// Scratch directories of one test program. Each is made fresh; when the program ends they are
// removed if every test passed, and kept (named on stderr) when one failed, for a look.
// Without it every cluster test left ~190 MB in /tmp, and `scripts/test --repeat 20` filled the
// disk of a machine with less than ~60 GB free.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace meshwork::test {

class ScratchDirs : public ::testing::Environment {
 public:
  void add(const std::filesystem::path& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& d : dirs_)
      if (d == dir) return;
    dirs_.push_back(dir);
  }
  void TearDown() override {
    const bool passed = ::testing::UnitTest::GetInstance()->Passed();
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& d : dirs_) {
      if (passed) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      } else {
        std::fprintf(stderr, "scratch directory kept for a look: %s\n", d.c_str());
      }
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::filesystem::path> dirs_;
};

// Registered once per program (gtest owns it and runs TearDown after the last test).
inline ScratchDirs* const scratch_dirs =
    static_cast<ScratchDirs*>(::testing::AddGlobalTestEnvironment(new ScratchDirs));

// `root` is removed at the end (if every test passed); returns `dir` (inside root, or root
// itself) emptied and created.
inline std::filesystem::path fresh_scratch_dir(const std::filesystem::path& root, const std::filesystem::path& dir) {
  scratch_dirs->add(root);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace meshwork::test
