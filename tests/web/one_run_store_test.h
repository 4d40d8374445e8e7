// The starting point of the server's tests: a run store of the test's own (dir_/runs.db, written
// through writer_) holding one finished run "alpha" (1x2x1x1) of a given number of steps.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/store/run_store.h"
#include "tests/web/web_fixture.h"

namespace meshwork::web::testing {

class OneRunStoreTest : public ::testing::Test {
 protected:
  explicit OneRunStoreTest(int64_t steps) : steps_(steps) {}
  void SetUp() override {
    db_ = dir_ / "runs.db";
    auto w = store::RunStore::open(db_);
    ASSERT_TRUE(w.ok());
    writer_ = std::move(*w);
    run_ = finished_run(*writer_, RunSpec{"alpha", shape(1, 2, 1, 1)}, steps_);
    ASSERT_NE(run_, 0);
  }

  TempDir dir_;
  std::filesystem::path db_;
  std::unique_ptr<store::RunStore> writer_;
  store::RunId run_ = 0;

 private:
  int64_t steps_;
};

}  // namespace meshwork::web::testing
