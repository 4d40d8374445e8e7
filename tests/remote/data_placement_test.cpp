// Where a launch's training data comes from on each node (remote/data_placement.h): used in
// place when every node has it, uploaded into the run directory when only this machine does,
// refused naming path and nodes otherwise. Real files in a temporary directory.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "remote/data_placement.h"
#include "tests/scratch_dirs.h"

namespace fs = std::filesystem;
using namespace meshwork::remote;

namespace {

fs::path prepared_dir() {
  const fs::path root = fs::temp_directory_path() / ("data-placement-test-" + std::to_string(getpid()));
  const fs::path d = ::meshwork::test::fresh_scratch_dir(root, root / "shards");
  for (const char* f : {"train_000001.bin", "train_000000.bin", "manifest.json", "notes.txt"})
    std::ofstream(d / f) << f;
  return d;
}

TEST(DataPlacement, OnEveryNodeIsUsedInPlace) {
  const fs::path d = prepared_dir();
  auto plan = place_data(d.string(), local_data_files(d.string()), {{"a", true}, {"b", true}});
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_TRUE(plan->uploads.empty());
  EXPECT_EQ(plan->node_path, d.string());
}

TEST(DataPlacement, MissingOnANodeButHereIsUploadedIntoTheRunDirectory) {
  const fs::path d = prepared_dir();
  const auto files = local_data_files(d.string());
  // The shards meshtrain reads and the manifest, sorted; other files stay home.
  ASSERT_EQ(files, (std::vector<std::string>{(d / "manifest.json").string(), (d / "train_000000.bin").string(),
                                             (d / "train_000001.bin").string()}));
  auto plan = place_data(d.string(), files, {{"a", true}, {"user@b:2222", false}});
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->node_path, "data/shards");
  ASSERT_EQ(plan->uploads.size(), 3u);
  EXPECT_EQ(plan->uploads[1].local_path, (d / "train_000000.bin").string());
  EXPECT_EQ(plan->uploads[1].name, "data/shards/train_000000.bin");
  EXPECT_EQ(plan->uploads[1].mode, 0600);
  // A single shard file: data/<file>, a trailing slash on a directory changes nothing.
  const std::string one = (d / "train_000000.bin").string();
  auto single = place_data(one, local_data_files(one), {{"b", false}});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->node_path, "data/train_000000.bin");
  ASSERT_EQ(single->uploads.size(), 1u);
  EXPECT_EQ(single->uploads[0].name, "data/train_000000.bin");
  auto slash = place_data(d.string() + "/", local_data_files(d.string() + "/"), {{"b", false}});
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ(slash->node_path, "data/shards");
  // Held-out shards of the same name go to their own folder.
  auto eval = place_data(d.string(), files, {{"b", false}}, "eval_data");
  ASSERT_TRUE(eval.ok());
  EXPECT_EQ(eval->node_path, "eval-data/shards");
  EXPECT_EQ(eval->uploads[2].name, "eval-data/shards/train_000001.bin");
}

TEST(DataPlacement, NowhereHereAndMissingOnNodesIsRefusedNamingThem) {
  const std::string gone = "/scratch/corpus/shards";
  EXPECT_TRUE(local_data_files(gone).empty());
  auto plan = place_data(gone, local_data_files(gone), {{"n1", false}, {"n2", true}, {"n3", false}});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message(),
            "data: /scratch/corpus/shards: a path every node can read: not found on n1, n3 (put the prepared "
            "shards on a filesystem the nodes share, at the same path, or launch from the machine that holds "
            "them so they are uploaded with the run)");
  // No data named: the bundled corpus, nothing to place.
  auto none = place_data("", {}, {{"n1", false}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->uploads.empty());
}

}  // namespace
