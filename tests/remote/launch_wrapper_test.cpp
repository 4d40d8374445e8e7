// The node wrapper that supervisor_command() builds, run by a real /bin/sh on this machine with a
// stand-in trainer (a shell script that records its arguments and fails as told): the exit file,
// restarts with --resume on a new port, no restart after a stop, and a hostile run directory.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "remote/launch.h"
#include "core/shell_quote.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class Wrapper : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    base_ = fs::temp_directory_path() / ("meshwork-wrapper-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    // Quotes, spaces, ';', $(...) and a backquote: none may run.
    dir_ = base_ / "run it's \"q\"; touch pwned; $(touch pwned2) `touch pwned3`";
    fs::create_directories(dir_);
    rec_.nodes = {{"local", 1, dir_.string(), "127.0.0.1"}};
    rec_.master_addr = "127.0.0.1; touch pwned";  // every value is one argument, never shell text
    rec_.master_port = 29100;
  }
  void TearDown() override {
    for (const fs::path& d : {base_, dir_, fs::current_path()})
      for (const char* f : {"pwned", "pwned2", "pwned3"}) EXPECT_FALSE(fs::exists(d / f)) << d / f;
    fs::remove_all(base_);
  }
  // The stand-in: attempt n records its argv in argv<n> and exits with the n-th number of `codes`.
  void trainer(const std::string& codes) {
    std::ofstream(dir_ / "meshtrain") << "#!/bin/sh\n"
                                         "n=$(cat attempts 2>/dev/null || echo 0); n=$((n+1)); echo $n > attempts\n"
                                         "printf '%s\\n' \"$@\" > argv$n\n"
                                         "set -- " << codes << "; shift $((n-1)); exit ${1:-0}\n";
    fs::permissions(dir_ / "meshtrain", fs::perms::owner_all);
  }
  // Runs the wrapper as launch does, waits for node0.exit; returns its status.
  int run_wrapper(std::chrono::seconds limit = 20s) {
    const std::string cmd = supervisor_command(rec_, 0);
    EXPECT_EQ(std::system(("sh -c " + shell_quote(cmd) + " > /dev/null").c_str()), 0);
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!fs::exists(dir_ / "node0.exit") && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(50ms);
    const std::string text = test::read_text(dir_ / "node0.exit");
    EXPECT_FALSE(text.empty()) << "node0.exit never written";
    return text.empty() ? -1 : std::stoi(text);
  }
  int attempts() { return std::stoi(test::read_text(dir_ / "attempts")); }
  std::string argv(int n) { return test::read_text(dir_ / ("argv" + std::to_string(n))); }

  fs::path base_, dir_;
  LaunchRecord rec_;
};

TEST_F(Wrapper, RecordsTheExitStatusAndPassesArgumentsVerbatim) {
  trainer("7");
  EXPECT_EQ(run_wrapper(), 7);
  EXPECT_EQ(attempts(), 1);
  // The run config and the node's facts, nothing else; started inside the run directory.
  EXPECT_NE(argv(1).find("--config\nrun_config.json\n"), std::string::npos) << argv(1);
  EXPECT_NE(argv(1).find("--run-dir\n.\n"), std::string::npos) << argv(1);
  EXPECT_NE(argv(1).find("--master-addr\n127.0.0.1; touch pwned\n"), std::string::npos) << argv(1);
  EXPECT_EQ(argv(1).find("--resume"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "node0.restarts"));
}

TEST_F(Wrapper, RestartsWithResumeOnTheNextPortUntilItSucceeds) {
  rec_.max_restarts = 3;
  trainer("3 3 0");
  EXPECT_EQ(run_wrapper(30s), 0);
  EXPECT_EQ(attempts(), 3);
  EXPECT_NE(argv(2).find("--resume\n--master-port\n29101\n"), std::string::npos) << argv(2);
  EXPECT_NE(argv(3).find("--resume\n--master-port\n29102\n"), std::string::npos) << argv(3);
  const std::string restarts = test::read_text(dir_ / "node0.restarts");
  EXPECT_EQ(restarts.rfind("1 3 ", 0), 0u) << restarts;
  EXPECT_NE(restarts.find("\n2 3 "), std::string::npos) << restarts;
}

TEST_F(Wrapper, GivesUpAfterMaxRestarts) {
  rec_.max_restarts = 1;
  trainer("3 4 0");
  EXPECT_EQ(run_wrapper(), 4);
  EXPECT_EQ(attempts(), 2);
}

TEST_F(Wrapper, NeverRestartsAStoppedNode) {
  rec_.max_restarts = 2;
  trainer("143 0");
  std::ofstream(dir_ / "node0.stop");  // as stop_node leaves it before signalling
  EXPECT_EQ(run_wrapper(), 143);
  EXPECT_EQ(attempts(), 1);
}

// A resumed segment of a re-planned run (remote/elastic.h): meshtrain starts from the shared
// checkpoint directory (a hostile path stays one argument), and its metrics sources carry the
// segment so they never meet the offsets of the first segment's files.
TEST_F(Wrapper, ResumedSegmentStartsFromTheSharedCheckpointDirectory) {
  rec_.segment = 1;
  rec_.checkpoint_dir = (base_ / "first's \"run\"; touch pwned" / "checkpoints").string();
  rec_.resume = true;
  trainer("0");
  EXPECT_EQ(run_wrapper(), 0);
  EXPECT_NE(argv(1).find("--checkpoint-dir\n" + rec_.checkpoint_dir + "\n--resume\n"), std::string::npos) << argv(1);
  EXPECT_EQ(rec_.source_of(0, 0), "seg1/node0/metrics-rank0.jsonl");
  rec_.segment = 0;
  EXPECT_EQ(rec_.source_of(0, 0), "node0/metrics-rank0.jsonl");  // as before segments existed
}

TEST(LaunchRecordJson, SegmentRoundTripsAndDefaultsToTheRunAsLaunched) {
  LaunchRecord r;
  r.nodes = {{"node0", 2, "/tmp/x", "10.0.0.1"}};
  r.segment = 2;
  r.checkpoint_dir = "/shared/run-a/checkpoints";
  r.resume = true;
  auto back = launch_record_from_json(to_json(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->segment, 2);
  EXPECT_EQ(back->checkpoint_dir, "/shared/run-a/checkpoints");
  EXPECT_TRUE(back->resume);
  nlohmann::json old = to_json(r);
  for (const char* k : {"segment", "checkpoint_dir", "resume"}) old.erase(k);  // written before segments
  auto first = launch_record_from_json(old);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->segment, 0);
  EXPECT_TRUE(first->checkpoint_dir.empty());
  EXPECT_FALSE(first->resume);
}

TEST(LaunchRecordJson, MaxRestartsRoundTripsAndDefaultsToZero) {
  LaunchRecord r;
  r.nodes = {{"node0", 2, "/tmp/x", "10.0.0.1"}};
  r.max_restarts = 2;
  auto back = launch_record_from_json(to_json(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->max_restarts, 2);
  nlohmann::json old = to_json(r);
  old.erase("max_restarts");  // a record written before restarts existed
  EXPECT_EQ(launch_record_from_json(old)->max_restarts, 0);
}

}  // namespace
}  // namespace meshwork::remote
