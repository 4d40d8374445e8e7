// A re-planned run's segments in a real SQLite file (core/store/run_segments.h): one run, its
// segments in order with their shapes and causes; a run that never re-planned has none; deleting
// the run forgets them.
#include "core/store/run_segments.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::open_store;
using testing::TempDir;

nlohmann::json elastic_config() {
  return {{"v", 1},
          {"name", "elastic"},
          {"mesh", {{"dp_replicate", 1}, {"dp_shard", 4}, {"cp", 1}, {"tp", 1}}},
          {"cluster", {{"nodes", {{{"host", "node-a"}, {"slots", 2}}, {{"host", "node-b"}, {"slots", 2}}}}}}};
}

TEST(RunSegmentsIntegration, ReplannedRunKeepsItsSegmentsInOrder) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  auto run = store->create_run("elastic", elastic_config(), nlohmann::json::object());
  ASSERT_TRUE(run.ok());
  auto none = run_segments(*store, *run);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  auto second = begin_segment(*store, *run, 7, MeshShape{1, 2, 1, 1}, {"node-a"},
                              "node node-b lost: its ranks exited (signal KILL)", 1000.0);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_EQ(second->segment, 1);

  // Reopened: what a reader in another process sees.
  store.reset();
  store = open_store(dir / "runs.db");
  auto segs = run_segments(*store, *run);
  ASSERT_TRUE(segs.ok());
  ASSERT_EQ(segs->size(), 2u);
  const RunSegment& first = (*segs)[0];
  EXPECT_EQ(first.segment, 0);
  EXPECT_EQ(first.from_step, 1);
  EXPECT_EQ(first.mesh, (MeshShape{1, 4, 1, 1}));
  EXPECT_EQ(first.hosts, (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(first.cause, "launched");
  const RunSegment& resumed = (*segs)[1];
  EXPECT_EQ(resumed.from_step, 7);
  EXPECT_EQ(resumed.mesh, (MeshShape{1, 2, 1, 1}));
  EXPECT_EQ(resumed.world, 2);
  EXPECT_EQ(resumed.hosts, (std::vector<std::string>{"node-a"}));
  EXPECT_EQ(resumed.cause, "node node-b lost: its ranks exited (signal KILL)");

  // A segment cannot start before the last one did.
  auto back = begin_segment(*store, *run, 3, MeshShape{1, 1, 1, 1}, {"node-a"}, "x", 1001.0);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.error().field, "from_step");
  EXPECT_EQ(back.error().value, "3");
  EXPECT_EQ(run_segments(*store, *run)->size(), 2u);  // nothing written by the refusal

  ASSERT_TRUE(store->delete_run(*run).ok());
  EXPECT_TRUE(run_segments(*store, *run)->empty());
}

TEST(RunSegmentsIntegration, UnknownRunIsAnError) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  auto seg = begin_segment(*store, 42, 5, MeshShape{1, 1, 1, 1}, {}, "x", 1.0);
  EXPECT_FALSE(seg.ok());
}

}  // namespace
}  // namespace meshwork::store
