// Helpers shared by the store tests: a fresh temporary directory per test and metrics lines
// written with core's own serializer (the exact format meshtrain writes).
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "core/metrics.h"
#include "core/store/run_store.h"

namespace meshwork::store::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("meshwork-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline StepRecord step_record(int rank, int64_t step, double loss) {
  StepRecord r;
  r.rank = rank;
  r.step = step;
  r.time = 1000.0 + static_cast<double>(step);
  r.loss = loss;
  r.lr = 1e-3;
  r.grad_norm = 0.5;
  r.tokens = 100;
  r.tokens_per_s = 4000 + rank;
  r.tflops = 1.5;
  r.mfu = 0.25;
  r.mem_bytes = 1 << 20;
  r.mem_peak_bytes = 2 << 20;
  r.comm_s = AxisArray<double>::of(0.01, 0.02, 0.03, 0.04);
  r.compute_s = 0.1;
  r.step_s = 0.2;
  return r;
}

inline std::string step_line(int rank, int64_t step, double loss) {
  return to_json_line(step_record(rank, step, loss)) + "\n";
}

inline std::string start_line(int rank, int world, const nlohmann::json& config = {}) {
  StartRecord s;
  s.rank = rank;
  s.world = world;
  s.host = "node" + std::to_string(rank / 2);
  s.node = rank / 2;
  s.pid = 4000 + rank;
  s.time = 999;
  if (!config.is_null()) s.config = config;
  return to_json_line(s) + "\n";
}

inline std::string end_line(int rank, const std::string& status, const std::string& reason = "") {
  EndRecord e;
  e.rank = rank;
  e.status = status;
  e.reason = reason;
  e.time = 5000;
  return to_json_line(e) + "\n";
}

inline int64_t count(RunStore& store, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(store.handle(), sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
  int64_t n = -1;
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

inline std::unique_ptr<RunStore> open_store(const std::filesystem::path& db) {
  auto s = RunStore::open(db);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  return s.ok() ? std::move(*s) : nullptr;
}

}  // namespace meshwork::store::testing
