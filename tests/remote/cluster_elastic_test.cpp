// Losing a node and going on, end to end on the namespace cluster (remote/elastic.h): a run
// launched --elastic on 2 nodes x 2 ranks loses node 1 (its supervisor and ranks SIGKILLed, or
// its link cut while they go on) after a checkpoint; with no user action the run goes on at the re-planned shape on node 0 alone from
// the last complete checkpoint, as a second segment of the same run, and ends with the loss of
// the same run uninterrupted. When no shape fits the node left, the message says what would and
// nothing is launched. The cluster's run root is one filesystem every node reaches, as the
// checkpoints must be (docs/elastic.md).
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <map>
#include <sstream>

#include "core/store/run_segments.h"
#include "core/store/run_store.h"
#include "remote/launch.h"
#include "remote/run_layout.h"
#include "cli_process.h"
#include "cluster_run_fixture.h"
#include "stored_losses.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using test::Cli;
using test::run_cli;
using test::spawn_cli;
using test::wait_exit;
using test::wait_for;

class ClusterElastic : public test::ClusterRun {
 protected:
  static constexpr int kSteps = 16;

  std::vector<std::string> elastic_args(const std::string& name, std::vector<std::string> extra) const {
    auto a = launch_args(kSteps, name, false);
    for (const char* s : {"--checkpoint-every", "2", "--elastic"}) a.push_back(s);
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  void TearDown() override {
    if (!cut_veth_.empty()) {
      // The link back, and node 1's processes the cut left running ended, so that the other
      // tests find the cluster as it was.
      std::system(("ip link set " + cut_veth_ + " up").c_str());
      kill_node1(cut_run_);
    }
    ClusterRun::TearDown();
  }

  // The host side of node `i`'s veth (tests/cluster/cluster.sh: "v<tag><i>", its namespace
  // "mw<tag>-n<i>").
  std::string veth(int i) const {
    const std::string ns = test::read_text(cluster_.dir / ("node" + std::to_string(i)) / "ns");
    return "v" + ns.substr(2, ns.find("-n") - 2) + std::to_string(i);
  }

  // Node 1 goes down: its wrapper's group (the wrapper and the supervisor) first, so that no
  // supervisor is left to write an exit record, then its ranks.
  // The id of the run the background launch stored under `name`, once it is there (0: not
  // within 120 s).
  store::RunId stored_run_named(const std::string& name) {
    store::RunId id = 0;
    test::wait_for([&] {
      auto s = store::RunStore::open(db_);
      auto runs = (*s)->list_runs();
      for (const auto& r : *runs)
        if (r.name == name) id = r.id;
      return id != 0;
    }, 120s);
    return id;
  }

  void kill_node1(const LaunchRecord& rec) {
    const fs::path dir = rec.nodes[1].run_dir;
    const std::string pgid = test::read_text(dir / "node1.pgid");
    ASSERT_FALSE(pgid.empty());
    ::kill(-static_cast<pid_t>(std::stol(pgid)), SIGKILL);  // may have ended (a cut link's watchdog)
    for (const char* f : {"supervisor-node1.pid", "rank2.pid", "rank3.pid"}) {
      const std::string pid = test::read_text(dir / f);
      if (!pid.empty()) ::kill(static_cast<pid_t>(std::stol(pid)), SIGKILL);
    }
  }

  // Rank 0's loss per step, from the store.
  std::map<int64_t, double> rank0_losses(store::RunId id) { return test::stored_losses(db_, id); }

  std::string cut_veth_;    // set while node 1's link is cut: TearDown brings it back
  LaunchRecord cut_run_;   // the run whose node 1 was cut off

  size_t run_dirs() {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(root_))
      if (e.is_directory() && e.path().filename().string().rfind("run-", 0) == 0) ++n;
    return n;
  }
};

TEST_F(ClusterElastic, LostNodeResumesOnTheSurvivorAtANewShapeWithTheUninterruptedLoss) {
  // The reference: the same run, uninterrupted.
  Cli ref = run_cli(launch_args(kSteps, "reference", false), tmp_);
  ASSERT_EQ(ref.code, 0) << ref.err;
  const store::RunId ref_id = wait_run();
  const auto reference = rank0_losses(ref_id);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kSteps));

  const auto t0 = std::chrono::steady_clock::now();
  const pid_t launch = spawn_cli(elastic_args("elastic", {}), tmp_);
  const store::RunId id = stored_run_named("elastic");
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  const LaunchRecord first = record(id);
  // After the checkpoint of step 4 (every rank has logged step 5), before the end.
  ASSERT_TRUE(wait_for([&] { return steps_in_file(first, 3) >= 6; }, 120s)) << test::read_text(tmp_ / "bg.err");
  const int at_kill = steps_in_file(first, 3);
  ASSERT_LT(at_kill, kSteps) << "the run ended before the kill; make it longer";
  kill_node1(first);
  const int code = wait_exit(launch);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string err = test::read_text(tmp_ / "bg.err");
  ASSERT_EQ(code, 0) << err;
  EXPECT_NE(err.find("node 1 (node1) lost: its supervisor and ranks were killed"), std::string::npos) << err;
  EXPECT_NE(err.find("re-planned for the survivors"), std::string::npos) << err;

  auto s = store::RunStore::open(db_);
  auto runs = (*s)->list_runs();
  ASSERT_EQ(runs->size(), 2u);  // the reference and the elastic run: one run, not two
  auto info = (*s)->get_run(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "ok") << info->summary.exit_reason;
  auto segments = store::run_segments(**s, id);
  ASSERT_TRUE(segments.ok());
  ASSERT_EQ(segments->size(), 2u);
  const store::RunSegment& lost = (*segments)[0];
  const store::RunSegment& resumed = (*segments)[1];
  EXPECT_EQ(lost.world, 4);
  EXPECT_EQ(lost.hosts, (std::vector<std::string>{"node0", "node1"}));
  EXPECT_EQ(resumed.world, 2);
  EXPECT_EQ(resumed.hosts, (std::vector<std::string>{"node0"}));
  EXPECT_NE(resumed.mesh, lost.mesh);
  EXPECT_NE(resumed.cause.find("node 1 (node1) lost"), std::string::npos) << resumed.cause;
  // From the last complete checkpoint: an even step at most where rank 3 had got.
  EXPECT_GE(resumed.from_step, 3);
  EXPECT_LE(resumed.from_step, at_kill + 1);
  EXPECT_EQ((resumed.from_step - 1) % 2, 0);

  // The second segment ran in its own run directory, read the first one's checkpoint and wrote
  // its own metrics under its own sources.
  const LaunchRecord second = record(id);
  EXPECT_EQ(second.segment, 1);
  ASSERT_EQ(second.nodes.size(), 1u);
  EXPECT_NE(second.nodes[0].run_dir, first.nodes[0].run_dir);
  EXPECT_EQ(second.checkpoint_dir, second.nodes[0].run_dir + "/checkpoints");
  const std::string log = test::read_text(fs::path(second.nodes[0].run_dir) / rank_log_file(0));
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  EXPECT_GT(stored_offset(id, "seg1/node0/metrics-rank0.jsonl"), 0u);

  // The same step axis, the uninterrupted run's losses.
  const auto losses = rank0_losses(id);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));
  for (const auto& [step, loss] : reference) {
    ASSERT_TRUE(losses.count(step)) << "step " << step;
    EXPECT_NEAR(losses.at(step), loss, 1e-4) << "step " << step;
  }
  std::cout << "[ measure ] final loss " << losses.rbegin()->second << " (uninterrupted " << reference.rbegin()->second
            << "); node 1 killed after " << at_kill << " steps, resumed at step " << resumed.from_step << " at "
            << resumed.mesh.compact() << "; elastic run " << secs << " s\n";

  const auto from = err.find("elastic: re-planned");
  std::cout << "[ notice ] " << err.substr(from, err.find("meshwork: info: elastic: segment", from) - from);

  Cli list = run_cli({"runs", "list", "--db", db_.string()}, tmp_);
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("2 segments"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("segment 1 from step " + std::to_string(resumed.from_step)), std::string::npos) << list.out;

  // The store, kept for the README's picture of this run (ui/screenshots_elastic.cpp).
  if (const char* keep = std::getenv("MESHWORK_TEST_KEEP_STORE"); keep && *keep) {
    fs::remove(keep);
    const std::string sql = "VACUUM INTO '" + std::string(keep) + "'";
    EXPECT_EQ(sqlite3_exec((*s)->handle(), sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << keep;
  }
}

// Node 1's link is cut (the host side of its veth down) while its supervisor and ranks go on:
// nothing ends by itself there (node 0's ranks wait in collectives with node 1's, for the
// watchdog's 240 s). The follower hears nothing from node 1 for --lost-after, declares it lost,
// stops node 0, and the re-plan goes on on node 0 from the last complete checkpoint, read
// through node 0, into a checkpoint directory of the new segment's own (node 1's ranks still
// run and may still write into the first one).
TEST_F(ClusterElastic, CutLinkIsLostAfterTheLimitAndTheRunResumesOnTheSurvivorWithTheUninterruptedLoss) {
  Cli ref = run_cli(launch_args(kSteps, "reference", false), tmp_);
  ASSERT_EQ(ref.code, 0) << ref.err;
  const auto reference = rank0_losses(wait_run());
  ASSERT_EQ(reference.size(), static_cast<size_t>(kSteps));

  const pid_t launch = spawn_cli(elastic_args("cut", {"--lost-after", "15"}), tmp_);
  const store::RunId id = stored_run_named("cut");
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  const LaunchRecord first = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(first, 3) >= 6; }, 120s)) << test::read_text(tmp_ / "bg.err");
  const int at_cut = steps_in_file(first, 3);
  ASSERT_LT(at_cut, kSteps) << "the run ended before the cut; make it longer";
  cut_run_ = first;
  cut_veth_ = veth(1);
  const auto cut = std::chrono::steady_clock::now();
  ASSERT_EQ(std::system(("ip link set " + cut_veth_ + " down").c_str()), 0) << cut_veth_;
  auto since_cut = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count(); };
  const std::string bg_err = (tmp_ / "bg.err").string();
  // Generous bounds: these are measured, not asserted.
  ASSERT_TRUE(wait_for([&] { return test::read_text(bg_err).find("its link is lost") != std::string::npos; }, 120s))
      << test::read_text(bg_err);
  const double to_lost = since_cut();
  ASSERT_TRUE(wait_for([&] { return test::read_text(bg_err).find("re-planned for the survivors") != std::string::npos; },
                       120s))
      << test::read_text(bg_err);
  const double to_replan = since_cut();
  const int code = wait_exit(launch);
  const double to_end = since_cut();
  const std::string err = test::read_text(bg_err);
  ASSERT_EQ(code, 0) << err;
  EXPECT_NE(err.find("node 1 (node1) unreachable for "), std::string::npos) << err;
  EXPECT_NE(err.find("node 1 (node1) lost: unreachable"), std::string::npos) << err;
  // Not before the limit, counted from the last byte node 1 sent (a heartbeat is due every 2 s).
  EXPECT_GE(to_lost, 15.0 - 2.5);

  auto s = store::RunStore::open(db_);
  ASSERT_EQ((*s)->list_runs()->size(), 2u);  // the reference and the elastic run
  auto info = (*s)->get_run(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "ok") << info->summary.exit_reason;
  auto segments = store::run_segments(**s, id);
  ASSERT_TRUE(segments.ok());
  ASSERT_EQ(segments->size(), 2u);
  const store::RunSegment& resumed = (*segments)[1];
  EXPECT_EQ(resumed.world, 2);
  EXPECT_EQ(resumed.hosts, (std::vector<std::string>{"node0"}));
  EXPECT_NE(resumed.cause.find("node 1 (node1) lost: unreachable"), std::string::npos) << resumed.cause;
  EXPECT_GE(resumed.from_step, 3);
  EXPECT_LE(resumed.from_step, at_cut + 1);
  EXPECT_EQ((resumed.from_step - 1) % 2, 0);

  // The new segment's checkpoints are its own: the one it resumed from linked in, the last one
  // written there, none into the directory node 1's ranks still have.
  const LaunchRecord second = record(id);
  ASSERT_EQ(second.nodes.size(), 1u);
  const fs::path own = second.checkpoint_dir;
  EXPECT_EQ(own, fs::path(second.nodes[0].run_dir) / "checkpoints");
  char name[32];
  std::snprintf(name, sizeof name, "step-%08d", static_cast<int>(resumed.from_step - 1));
  EXPECT_TRUE(fs::exists(own / name / "COMPLETE")) << own / name;
  std::snprintf(name, sizeof name, "step-%08d", kSteps);
  EXPECT_TRUE(fs::exists(own / name / "COMPLETE")) << own / name;
  EXPECT_FALSE(fs::exists(fs::path(first.nodes[0].run_dir) / "checkpoints" / name));

  const auto losses = rank0_losses(id);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));
  for (const auto& [step, loss] : reference) {
    ASSERT_TRUE(losses.count(step)) << "step " << step;
    EXPECT_NEAR(losses.at(step), loss, 1e-4) << "step " << step;
  }
  std::cout << "[ measure ] link cut after " << at_cut << " steps; declared lost " << to_lost << " s after the cut"
            << " (--lost-after 15), re-planned after " << to_replan << " s, run ended after " << to_end
            << " s; resumed at step " << resumed.from_step << " at " << resumed.mesh.compact() << "; final loss "
            << losses.rbegin()->second << " (uninterrupted " << reference.rbegin()->second << ")\n";
  const auto from = err.find("node 1 (node1) unreachable");
  std::cout << "[ notice ] " << err.substr(from, err.find("meshwork: info: elastic: segment", from) - from);
}

// 1 MiB per rank holds the tiny model on 4 ranks (tp and cp split it) but on no shape of 2.
TEST_F(ClusterElastic, NothingFitsTheSurvivorSaysWhatWouldAndLaunchesNothing) {
  const pid_t launch = spawn_cli(elastic_args("no fit", {"--memory-per-rank", "1MiB"}), tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 4; }, 120s)) << test::read_text(tmp_ / "bg.err");
  ASSERT_LT(steps_in_file(rec, 3), kSteps) << "the run ended before the kill; make it longer";
  kill_node1(rec);
  EXPECT_EQ(wait_exit(launch), 3);  // does_not_fit (core/error.h)
  const std::string err = test::read_text(tmp_ / "bg.err");
  EXPECT_NE(err.find("nothing relaunched"), std::string::npos) << err;
  EXPECT_NE(err.find("needs 1 more node of 2 ranks"), std::string::npos) << err;
  auto s = store::RunStore::open(db_);
  auto segments = store::run_segments(**s, id);
  ASSERT_TRUE(segments.ok());
  EXPECT_TRUE(segments->empty());
  EXPECT_EQ(run_dirs(), 1u);  // no second run directory: nothing was deployed
  auto info = (*s)->get_run(id);
  EXPECT_EQ(info->summary.status, "failed");
  EXPECT_EQ(record(id).segment, 0);

  // `meshwork resume` asked the same says the same, launching nothing.
  Cli resume = run_cli({"resume", std::to_string(id), "--hosts", "node0", "--memory-per-rank", "1MiB", "--ssh-config",
                        cluster_.ssh_config(), "--known-hosts", (tmp_ / "known_hosts").string(), "--db", db_.string()},
                       tmp_);
  EXPECT_EQ(resume.code, 3) << resume.err;
  std::cout << "[ notice ] " << resume.err;
  EXPECT_NE(resume.err.find("needs 1 more node of 2 ranks"), std::string::npos) << resume.err;
  EXPECT_EQ(run_dirs(), 1u);
}

}  // namespace
}  // namespace meshwork::remote
