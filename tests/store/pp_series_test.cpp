// The fifth axis' series (schema v5): comm_s.pp is stored for pipelined runs only (meshtrain
// writes it only when pp > 1), and a version-4 store opens as version 5 with every point kept.
#include <gtest/gtest.h>

#include "core/store/schema.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::count;
using testing::open_store;
using testing::start_line;
using testing::step_line;
using testing::step_record;
using testing::TempDir;

std::string piped_step_line(int rank, int64_t step, double pp_seconds) {
  StepRecord r = step_record(rank, step, 3.0);
  r.comm_s[Axis::pp] = pp_seconds;
  return to_json_line(r) + "\n";
}

int64_t pp_key(RunStore& store) {
  return count(store, "SELECT id FROM keys WHERE name = 'comm_s.pp'");
}

TEST(StorePpSeries, OnlyPipelinedRunsHaveIt) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  EXPECT_EQ(count(*store, "SELECT col FROM keys WHERE name = 'comm_s.pp'"), 15);
  const RunId plain = *store->create_run("plain", {}, {});
  const RunId piped = *store->create_run("piped", {}, {});
  std::string a = start_line(0, 1), b = start_line(0, 2);
  for (int s = 0; s < 40; ++s) {
    a += step_line(0, s, 3.0);
    b += piped_step_line(0, s, 0.005 + 0.001 * s);
  }
  ASSERT_TRUE(store->ingest_chunk(plain, "rank0", 0, a).ok());
  ASSERT_TRUE(store->ingest_chunk(piped, "rank0", 0, b).ok());
  ASSERT_TRUE(store->flush_open_buckets().ok());
  const std::string key = std::to_string(pp_key(*store));
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics WHERE run = " + std::to_string(plain) + " AND key = " + key), 0);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics WHERE run = " + std::to_string(piped) + " AND key = " + key), 40);
  // The values as written, through the v2-compatible view.
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE run = " + std::to_string(piped) +
                              " AND key = 'comm_s.pp' AND abs(value - (0.005 + 0.001 * step)) < 1e-12"),
            40);
  // The other series of both runs are all there.
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE run = " + std::to_string(plain) + " AND key = 'comm_s.tp'"), 40);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE run = " + std::to_string(piped) + " AND key = 'comm_s.tp'"), 40);
}

TEST(StorePpSeries, VersionFourOpensAsFiveKeepingEveryPoint) {
  TempDir dir;
  RunId run = 0;
  int64_t points = 0;
  {
    auto store = open_store(dir / "runs.db");
    ASSERT_TRUE(store);
    run = *store->create_run("v4", {}, {});
    std::string text = start_line(0, 1);
    for (int s = 0; s < 100; ++s) text += step_line(0, s, 4.0 - 0.01 * s);
    ASSERT_TRUE(store->ingest_chunk(run, "rank0", 0, text).ok());
    ASSERT_TRUE(store->flush_open_buckets().ok());
    points = count(*store, "SELECT count(*) FROM metrics");
    ASSERT_EQ(points, 100 * 15);
  }
  {
    // Back to version 4: no pp column, no column index for its key, the views of 15 columns.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "runs.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "DROP VIEW summary; DROP VIEW metrics_v; DROP VIEW metrics;"
                           " ALTER TABLE steps DROP COLUMN v_comm_s_pp;"
                           " UPDATE keys SET col = NULL WHERE name = 'comm_s.pp';"
                           " UPDATE schema_version SET version = 4;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM pragma_table_info('steps') WHERE name = 'v_comm_s_pp'"), 1);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), points);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE key = 'loss' AND run = " + std::to_string(run)), 100);
  // And it takes pipelined runs.
  const RunId piped = *store->create_run("piped", {}, {});
  ASSERT_TRUE(store->ingest_chunk(piped, "rank0", 0, start_line(0, 2) + piped_step_line(0, 0, 0.25)).ok());
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE key = 'comm_s.pp' AND value = 0.25"), 1);
}

}  // namespace
}  // namespace meshwork::store
