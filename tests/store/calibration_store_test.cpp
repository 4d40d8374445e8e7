// Calibrations in the run store (real SQLite files): `meshtrain calibrate`'s records ingested
// like any metrics line, fitted, saved by fingerprint, found again by id prefix; the table is
// added to an existing database without touching its runs.
#include "core/calibration_records.h"
#include "core/store/calibration_store.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::end_line;
using testing::open_store;
using testing::start_line;
using testing::TempDir;

std::string calibration_line(int rank, const std::string& kind, nlohmann::json fields) {
  CalibrationRecord r;
  r.rank = rank;
  r.time = 1'764'000'000.0 + rank;
  r.kind = kind;
  r.fields = std::move(fields);
  return to_json_line(r) + "\n";
}

// Two ranks on one node: a node record, a matmul and all-reduces at two sizes per rank, as
// meshtrain calibrate writes them (t = 1e-4 + 2 (1/2) M / 1e9 on the slower rank).
std::string calibrate_run() {
  std::string text = start_line(0, 2) + start_line(1, 2);
  text += calibration_line(0, "node", {{"node", 0}, {"host", "box"}, {"ranks_per_node", 2}, {"cores", 2}, {"device_name", "cpu"}});
  for (int rank = 0; rank < 2; ++rank) {
    text += calibration_line(rank, "matmul", {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"m", 256},
                                              {"n", 256}, {"k", 256}, {"count", 2}, {"seconds", 1e-3}, {"iterations", 9}});
    for (double bytes : {65536.0, 16777216.0})
      text += calibration_line(rank, "collective", {{"op", "all_reduce"}, {"link", "intra_node"}, {"group_size", 2},
                                                    {"bytes", bytes}, {"seconds", (1e-4 + bytes / 1e9) * (rank ? 1.0 : 0.9)},
                                                    {"iterations", 3}});
  }
  return text + end_line(0, "ok") + end_line(1, "ok");
}

TEST(CalibrationStoreIntegration, RecordsAreIngestedFittedStoredAndFoundByFingerprint) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  auto run = store->create_run("calibrate", nlohmann::json::object(), {{"nodes", {{{"host", "local"}}}}});
  ASSERT_TRUE(run.ok());
  auto c = store->ingest_chunk(*run, "metrics-rank0.jsonl", 0, calibrate_run());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->malformed + c->unknown, 0);  // a known record type, not noise
  auto info = store->get_run(*run);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "ok");

  auto records = calibration_records(*store, *run);
  ASSERT_TRUE(records.ok()) << records.error().message();
  ASSERT_EQ(records->size(), 7u);
  auto cal = calibration_from_records(*records);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  ASSERT_EQ(cal->collectives.size(), 1u);
  EXPECT_NEAR(cal->collectives[0].fit.latency_s, 1e-4, 1e-10);  // the slower rank's times
  EXPECT_NEAR(cal->collectives[0].fit.bytes_per_s, 1e9, 1.0);
  EXPECT_NEAR(cal->matmul[0].flops_per_s, 2.0 * 256 * 256 * 256 / 1e-3, 1.0);

  auto id = save_calibration(*store, *cal, *run);
  ASSERT_TRUE(id.ok()) << id.error().message();
  const std::string fp = cal->fingerprint.id();
  auto found = latest_calibration(*store, fp.substr(0, 6));
  ASSERT_TRUE(found.ok()) << found.error().message();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, *id);
  EXPECT_EQ((*found)->run, *run);
  EXPECT_EQ((*found)->calibration.fingerprint.id(), fp);
  EXPECT_EQ((*found)->calibration.measured_at, cal->measured_at);

  // A newer calibration of the same cluster wins; another cluster's does not answer.
  Calibration newer = *cal;
  newer.measured_at = "2030-01-01T00:00:00Z";
  ASSERT_TRUE(save_calibration(*store, newer).ok());
  Calibration other = *cal;
  other.fingerprint.nodes[0].host = "replaced";
  ASSERT_TRUE(save_calibration(*store, other).ok());
  found = latest_calibration(*store, fp);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->calibration.measured_at, "2030-01-01T00:00:00Z");
  EXPECT_FALSE((*found)->run.has_value());
  auto all = list_calibrations(*store);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);

  // Reopened from the file: everything is still there.
  store.reset();
  auto again = open_store(dir / "runs.db");
  found = latest_calibration(*again, other.fingerprint.id());
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->calibration.fingerprint.nodes[0].host, "replaced");
}

TEST(CalibrationStoreIntegration, BadIdsAreRefusedWithTheirValue) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  auto r = latest_calibration(*store, "ab");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "--calibration");
  EXPECT_EQ(r.error().value, "ab");
  r = latest_calibration(*store, "XYZW");
  EXPECT_FALSE(r.ok());
  r = latest_calibration(*store, "abcd");  // well formed, nothing stored
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

}  // namespace
}  // namespace meshwork::store
