// Schema creation, refusal of foreign/newer databases, and the v1 -> v3 migration (v2 -> v3 on a
// real v2 file: migrate_v2_test.cpp).
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/store/paths.h"
#include "core/store/schema.h"
#include "core/store/sqlite.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::TempDir;
using testing::count;
using testing::open_store;

TEST(StoreSchema, FreshDatabaseHasCurrentSchemaInWalMode) {
  TempDir dir;
  auto store = open_store(dir / "nested/dirs/runs.db");  // parents are created
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  for (const char* table : {"runs", "ranks", "keys", "steps", "metrics", "buckets", "events",
                            "sources", "schema_version"})
    EXPECT_EQ(count(*store, std::string("SELECT count(*) FROM sqlite_master WHERE name='") +
                                table + "'"),
              1)
        << table;
  // Version 3: a step's series are columns of its `steps` row; `metrics` is a view of them.
  EXPECT_EQ(count(*store, "SELECT count(*) FROM sqlite_master WHERE type = 'view' AND name IN"
                          " ('metrics', 'metrics_v', 'summary')"),
            3);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM sqlite_master WHERE name = 'metrics_extra'"), 1);
  for (const std::string& c : value_columns())
    EXPECT_EQ(count(*store, "SELECT count(*) FROM pragma_table_info('steps') WHERE name = '" + c + "'"), 1)
        << c;
  EXPECT_EQ(count(*store, "SELECT count(*) FROM keys WHERE col IS NOT NULL"), 18);  // v5: + comm_s.pp, v6: + comm_s.ep, v7: + cpu_s
  // Version 6: a mixture of experts' routing, once per step (expert_load.h).
  for (const char* table : {"moe_steps", "expert_load"})
    EXPECT_EQ(count(*store, std::string("SELECT count(*) FROM sqlite_master WHERE name='") + table + "'"), 1) << table;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(store->handle(), "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  // Opening again keeps the version (no second migration).
  store.reset();
  store = open_store(dir / "nested/dirs/runs.db");
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
}

// The store holds host names, configs and commands: a new file and its WAL are the user's alone,
// whatever the umask.
TEST(StoreSchema, NewDatabaseAndItsWalArePrivateToTheUser) {
  TempDir dir;
  const mode_t old_mask = ::umask(0022);
  auto store = open_store(dir / "runs.db");
  ::umask(old_mask);
  ASSERT_TRUE(store);
  ASSERT_TRUE(sql::exec(store->handle(), "INSERT INTO keys(name) VALUES ('private')").ok());
  for (const char* file : {"runs.db", "runs.db-wal", "runs.db-shm"}) {
    ASSERT_TRUE(std::filesystem::exists(dir / file)) << file;
    const auto perms = std::filesystem::status(dir / file).permissions();
    EXPECT_EQ(perms & std::filesystem::perms::all, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << file;
  }
}

TEST(StoreSchema, RefusesADatabaseFromANewerMeshworkAndLeavesItAlone) {
  TempDir dir;
  {
    auto store = open_store(dir / "runs.db");
    ASSERT_TRUE(store->create_run("keep", {}, {}).ok());
    sqlite3_exec(store->handle(), "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr);
  }
  auto again = RunStore::open(dir / "runs.db");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message().find("99"), std::string::npos) << again.error().message();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "runs.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM runs", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "keep");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(StoreSchema, RefusesForeignFilesWithoutChangingThem) {
  TempDir dir;
  {
    std::ofstream(dir / "notes.txt") << "not a database at all, just text\n";
  }
  auto text = RunStore::open(dir / "notes.txt");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().field, "store");
  std::ifstream in(dir / "notes.txt");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "not a database at all, just text");

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "other.db").c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE songs(title TEXT)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto other = RunStore::open(dir / "other.db");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find("not a Meshwork run store"), std::string::npos);
}

TEST(StoreSchema, MigratesVersion1KeepingRunsRanksEventsAndPoints) {
  TempDir dir;
  const auto path = dir / "old.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, kSchemaV1, nullptr, nullptr, nullptr), SQLITE_OK);
    const char* data = R"sql(
      INSERT INTO runs(id, name, created, status, exit_reason, config, cluster)
        VALUES (7, 'old run', 1700000000, 'failed', 'rank 1: oom',
                '{"model":"tiny","mesh":{"dp_shard":2}}', '{"nodes":[{"host":"local"}]}');
      INSERT INTO ranks VALUES (7, 0, 0, 'a', 11), (7, 1, 0, 'a', 12);
      INSERT INTO events(run, time, level, text) VALUES (7, 1700000100, 'error', 'rank 1 failed');
    )sql";
    ASSERT_EQ(sqlite3_exec(db, data, nullptr, nullptr, nullptr), SQLITE_OK);
    // 100 steps x 2 ranks of loss and tokens, a spike at step 50 of rank 1.
    sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
    sqlite3_stmt* ins = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO metrics VALUES (7, ?1, ?2, ?3, ?4, ?5)", -1, &ins, nullptr);
    for (int rank = 0; rank < 2; ++rank)
      for (int step = 0; step < 100; ++step) {
        for (const char* key : {"loss", "tokens"}) {
          const double v = std::string(key) == "tokens" ? 64.0
                           : (rank == 1 && step == 50) ? 99.0
                                                       : 10.0 - step * 0.05;
          sqlite3_bind_int(ins, 1, rank);
          sqlite3_bind_int(ins, 2, step);
          sqlite3_bind_double(ins, 3, 2000.0 + step);
          sqlite3_bind_text(ins, 4, key, -1, SQLITE_STATIC);
          sqlite3_bind_double(ins, 5, v);
          ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
          sqlite3_reset(ins);
        }
      }
    sqlite3_finalize(ins);
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto store = open_store(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  auto info = store->get_run(7);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->summary.name, "old run");
  EXPECT_EQ(info->summary.status, "failed");
  EXPECT_EQ(info->summary.exit_reason, "rank 1: oom");
  EXPECT_EQ(info->summary.shape, (MeshShape{1, 2, 1, 1}));
  EXPECT_EQ(info->summary.model, "tiny");
  EXPECT_EQ(info->summary.points, 400);
  EXPECT_EQ(info->summary.steps, 99);
  ASSERT_TRUE(info->summary.final_loss.has_value());
  EXPECT_DOUBLE_EQ(*info->summary.final_loss, 10.0 - 99 * 0.05);
  EXPECT_EQ(info->cluster["nodes"][0]["host"], "local");
  auto ranks = store->ranks(7);
  ASSERT_TRUE(ranks.ok());
  ASSERT_EQ(ranks->size(), 2u);
  EXPECT_EQ((*ranks)[1].pid, 12);
  auto events = store->events(7);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].text, "rank 1 failed");
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), 400);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM sqlite_master WHERE name = 'metrics_v1'"), 0);
  // Derived data was rebuilt: tokens are cumulative, charts see the spike, max is in summary.
  EXPECT_EQ(count(*store, "SELECT tokens FROM steps WHERE run = 7 AND rank = 0 AND step = 9"), 640);
  EXPECT_EQ(count(*store, "SELECT max FROM summary WHERE run = 7 AND key = 'loss' AND rank = 1"), 99);
  SeriesQuery q;
  q.runs = {7};
  q.rank = 1;
  q.x = XAxis::tokens;
  auto series = store->query_series(q);
  ASSERT_TRUE(series.ok()) << series.error().message();
  ASSERT_EQ(series->size(), 1u);
  EXPECT_EQ((*series)[0].source_points, 100);
  bool spike = false;
  for (const Point& p : (*series)[0].points) spike = spike || (p.y == 99.0 && p.x == 51 * 64.0);
  EXPECT_TRUE(spike);
  // The migrated store takes new points as usual.
  auto more = store->ingest_chunk(7, "late", 0, testing::step_line(0, 100, 1.0));
  ASSERT_TRUE(more.ok()) << more.error().message();
  EXPECT_EQ(more->points, 15);
  EXPECT_EQ(count(*store, "SELECT tokens FROM steps WHERE run = 7 AND rank = 0 AND step = 100"),
            100 * 64 + 100);
}

TEST(StoreSchema, DefaultPathFollowsXdgDataHome) {
  const char* old = std::getenv("XDG_DATA_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_DATA_HOME", "/tmp/xdg-test", 1);
  EXPECT_EQ(default_db_path(), std::filesystem::path("/tmp/xdg-test/meshwork/runs.db"));
  unsetenv("XDG_DATA_HOME");
  const char* home = std::getenv("HOME");
  ASSERT_NE(home, nullptr);
  EXPECT_EQ(default_db_path(), std::filesystem::path(home) / ".local/share/meshwork/runs.db");
  if (old) setenv("XDG_DATA_HOME", saved.c_str(), 1);
}

}  // namespace
}  // namespace meshwork::store

namespace meshwork::store {
namespace {

// Several processes (here: threads, each with its own connection) opening a new database at once:
// one creates the schema, the others find it created under the write lock and use it as is.
TEST(StoreSchema, ConcurrentFirstOpensAllSucceed) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    testing::TempDir dir;
    const auto path = dir / "runs.db";
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    std::vector<std::string> errors(6);
    for (int i = 0; i < 6; ++i)
      threads.emplace_back([&, i] {
        auto s = RunStore::open(path);
        if (s) ++ok;
        else errors[static_cast<size_t>(i)] = s.error().message();
      });
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    ASSERT_EQ(ok.load(), 6);
    auto store = testing::open_store(path);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
  }
}

}  // namespace
}  // namespace meshwork::store
