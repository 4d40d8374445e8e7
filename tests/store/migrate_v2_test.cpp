// Schema v2 -> v3 on a real version-2 file: tests/store/data/store_v2.db was written by the
// Meshwork before v3 (`meshwork runs import`, see data/README.md) and store_v2-run<N>.csv are
// that Meshwork's own `runs export` of it. After the migration every point, step, bucket, event
// and source is there: the export is byte-identical, and the `metrics_v` / `summary` views give
// the same rows as the v2 file's views did.
#include <fstream>
#include <sstream>

#include "core/store/schema.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::TempDir;
using testing::count;
using testing::open_store;

const std::filesystem::path kData = MESHWORK_STORE_TEST_DATA;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every row of a query as text (doubles with 17 digits), one line per row.
std::string dump(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
  std::string out;
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      char buf[64];
      switch (sqlite3_column_type(st, c)) {
        case SQLITE_NULL: out += "NULL"; break;
        case SQLITE_INTEGER: out += std::to_string(sqlite3_column_int64(st, c)); break;
        case SQLITE_FLOAT:
          std::snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(st, c));
          out += buf;
          break;
        default: out += reinterpret_cast<const char*>(sqlite3_column_text(st, c));
      }
      out += '|';
    }
    out += '\n';
  }
  sqlite3_finalize(st);
  return out;
}

const char* const kPoints = "SELECT run, rank, step, time, tokens, key, value FROM metrics_v"
                            " ORDER BY run, key, rank, step";
const char* const kSummary = "SELECT * FROM summary ORDER BY run, key, rank";
const char* const kBuckets = "SELECT * FROM buckets ORDER BY run, key, rank, level, bucket";
const char* const kOther = "SELECT * FROM runs ORDER BY id";
const char* const kRanks = "SELECT * FROM ranks ORDER BY run, rank";

TEST(StoreMigration, Version2FileFromMeshworkKeepsEveryPoint) {
  TempDir dir;
  const auto path = dir / "runs.db";
  std::filesystem::copy_file(kData / "store_v2.db", path);
  std::string points, summary, buckets, other, ranks, events, sources;
  int64_t v2_points = 0;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(dump(db, "SELECT version FROM schema_version"), "2|\n");
    points = dump(db, kPoints);
    summary = dump(db, kSummary);
    buckets = dump(db, kBuckets);
    other = dump(db, kOther);
    ranks = dump(db, kRanks);
    events = dump(db, "SELECT * FROM events ORDER BY id");
    sources = dump(db, "SELECT * FROM sources ORDER BY run, name");
    v2_points = std::stoll(dump(db, "SELECT count(*) FROM metrics"));
    sqlite3_close(db);
  }
  ASSERT_EQ(v2_points, 600);  // the fixture holds two real runs

  auto store = open_store(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%_v2'"), 0);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), v2_points);
  EXPECT_EQ(dump(store->handle(), kPoints), points);
  EXPECT_EQ(dump(store->handle(), kSummary), summary);
  EXPECT_EQ(dump(store->handle(), kBuckets), buckets);
  EXPECT_EQ(dump(store->handle(), kOther), other);
  EXPECT_EQ(dump(store->handle(), kRanks), ranks);
  EXPECT_EQ(dump(store->handle(), "SELECT * FROM events ORDER BY id"), events);
  EXPECT_EQ(dump(store->handle(), "SELECT * FROM sources ORDER BY run, name"), sources);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_extra"), 0);
  EXPECT_EQ(dump(store->handle(), "PRAGMA integrity_check"), "ok|\n");

  // The export of the old Meshwork, byte for byte.
  for (RunId run : {1, 2}) {
    std::ostringstream csv;
    ASSERT_TRUE(store->export_csv(run, csv).ok());
    EXPECT_EQ(csv.str(), read_file(kData / ("store_v2-run" + std::to_string(run) + ".csv")))
        << "run " << run;
  }

  // Charts read the migrated points: run 2's rank 5 has a 1e300 spike among its 8 steps.
  SeriesQuery q;
  q.runs = {2};
  q.rank = 5;
  auto series = store->query_series(q);
  ASSERT_TRUE(series.ok()) << series.error().message();
  ASSERT_EQ(series->size(), 1u);
  bool spike = false;
  for (const Point& p : (*series)[0].points) spike = spike || p.y == 1e300;
  EXPECT_TRUE(spike);
  EXPECT_EQ((*series)[0].source_points, 8);

  // Re-ingesting the same lines stores nothing; a new step continues the rank's tokens.
  const std::string again = read_file(kData / "store_v2-extra-rank5.jsonl");
  auto re = store->ingest_chunk(2, "again", 0, again);
  ASSERT_TRUE(re.ok()) << re.error().message();
  EXPECT_EQ(re->points, 0);
  EXPECT_EQ(re->duplicates, 9 * 15);
  const int64_t tokens7 = count(*store, "SELECT tokens FROM steps WHERE run = 2 AND rank = 5 AND step = 7");
  auto more = store->ingest_chunk(2, "late", 0, testing::step_line(5, 8, 1.0));
  ASSERT_TRUE(more.ok()) << more.error().message();
  EXPECT_EQ(more->points, 15);
  EXPECT_EQ(count(*store, "SELECT tokens FROM steps WHERE run = 2 AND rank = 5 AND step = 8"),
            tokens7 + 100);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), v2_points + 15);
}

// A v2 point whose key is not one of meshtrain's step series (a v1 database may hold any key),
// a point without a step row and a NULL (NaN) value: all survive the migration and read back.
TEST(StoreMigration, Version2KeysWithoutAColumnAndOrphanPointsSurvive) {
  TempDir dir;
  const auto path = dir / "runs.db";
  std::filesystem::copy_file(kData / "store_v2.db", path);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "INSERT INTO keys(name) VALUES ('custom');"
                           "INSERT INTO metrics SELECT 1, id, 0, 3, 42.5 FROM keys WHERE name = 'custom';"
                           "INSERT INTO metrics SELECT 1, id, 0, 1000, 7.0 FROM keys WHERE name = 'loss';"
                           "INSERT INTO metrics SELECT 1, id, 1, 1000, NULL FROM keys WHERE name = 'lr';"
                           "INSERT INTO keys(name) VALUES ('a,\"b\"' || char(10) || 'c');"
                           "INSERT INTO metrics SELECT 1, id, 0, 4, 1.5 FROM keys WHERE name LIKE 'a,%';"
                           "INSERT INTO keys(name) VALUES ('=HYPERLINK(1)');"
                           "INSERT INTO metrics SELECT 1, id, 0, 5, 2.5 FROM keys WHERE name LIKE '=HYP%';",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = open_store(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_extra"), 3);
  EXPECT_EQ(count(*store, "SELECT value FROM metrics_v WHERE run = 1 AND key = 'custom' AND step = 3"), 42);
  EXPECT_EQ(count(*store, "SELECT value FROM metrics_v WHERE run = 1 AND key = 'loss' AND step = 1000"), 7);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE run = 1 AND key = 'lr' AND step = 1000"
                          " AND rank = 1 AND value IS NULL"), 1);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics WHERE run = 1"), 240 + 5);
  ASSERT_TRUE(store->rebuild_derived(1).ok());
  SeriesQuery q;
  q.runs = {1};
  q.key = "custom";
  auto series = store->query_series(q);
  ASSERT_TRUE(series.ok()) << series.error().message();
  ASSERT_EQ((*series)[0].points.size(), 1u);
  EXPECT_EQ((*series)[0].points[0].y, 42.5);
  std::ostringstream csv;
  ASSERT_TRUE(store->export_csv(1, csv).ok());
  EXPECT_NE(csv.str().find(",custom,42.5\n"), std::string::npos);
  // Hostile keys stay one field each and never read as a spreadsheet formula.
  EXPECT_NE(csv.str().find(",\"a,\"\"b\"\"\nc\",1.5\n"), std::string::npos) << csv.str();
  EXPECT_NE(csv.str().find(",\"'=HYPERLINK(1)\",2.5\n"), std::string::npos) << csv.str();
  ASSERT_TRUE(store->delete_run(1).ok());
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics WHERE run = 1"), 0);
}

}  // namespace
}  // namespace meshwork::store
