// End to end on the namespace cluster with the real meshtrain, driven through the `meshwork` CLI
// as a user would: launch, faults (a killed rank, a cut SSH link, a killed workbench), attach,
// changed host keys, and hostile names. Every run's remote root is a path with spaces, quotes,
// ';' and $(...), so every command line of the launcher is exercised against injection.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/exit_record.h"
#include "core/metrics.h"
#include "core/store/run_store.h"
#include "remote/launch.h"
#include "remote/run_layout.h"
#include "core/shell_quote.h"
#include "cli_process.h"
#include "cluster_run_fixture.h"
#include "killed_rank_checks.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using test::Cli;
using test::run_cli;
using test::spawn_cli;
using test::wait_exit;
using test::alive;
using test::wait_for;

using test::ClusterRun;

TEST_F(ClusterRun, LaunchTwoNodesTwoRanksEveryMetricInTheStore) {
  const int steps = 6;
  const auto t0 = std::chrono::steady_clock::now();
  Cli r = run_cli(launch_args(steps, "e2e \"two nodes\"; it's $(fine)", false), tmp_);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.err;
  std::cout << "[ measure ] launch 2 nodes x 2 ranks, " << steps << " steps: " << secs << " s\n";
  EXPECT_NE(r.err.find("added host key of node0: SHA256:"), std::string::npos) << r.err;
  const store::RunId id = only_run();
  const LaunchRecord rec = record(id);
  ASSERT_EQ(rec.nodes.size(), 2u);
  EXPECT_EQ(rec.master_addr, cluster_.addresses[0]);
  // The run directory is private.
  EXPECT_EQ(fs::status(rec.nodes[0].run_dir).permissions() & fs::perms::all, fs::perms::owner_all);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(steps_in_file(rec, rank), steps) << "rank " << rank;
  expect_store_equals_files(id, rec);
  auto s = store::RunStore::open(db_);
  auto info = (*s)->get_run(id);
  EXPECT_EQ(info->summary.status, "ok");
  EXPECT_EQ(info->summary.name, "e2e \"two nodes\"; it's $(fine)");
  // Nothing secret leaves the key file: no line of the private key is in the store, the CLI's
  // output, the launch record, the exported CSV or any file of either node's run directory.
  {
    std::vector<std::string> secret;
    std::istringstream key(test::read_text(cluster_.identity()));
    for (std::string line; std::getline(key, line);)
      if (line.size() >= 20 && line.find("PRIVATE KEY") == std::string::npos) secret.push_back(line);
    ASSERT_FALSE(secret.empty());
    const fs::path csv = tmp_ / "run.csv";
    ASSERT_TRUE((*s)->export_csv(id, csv).ok());
    std::vector<std::pair<std::string, std::string>> places = {{"cli stdout", r.out}, {"cli stderr", r.err}};
    for (const fs::path& f : {fs::path(db_), fs::path(db_.string() + "-wal"), csv})
      if (fs::exists(f)) places.emplace_back(f.string(), test::read_text(f));
    for (const auto& node : rec.nodes)
      for (const auto& e : fs::recursive_directory_iterator(node.run_dir))
        if (e.is_regular_file() && e.file_size() < (64u << 20)) places.emplace_back(e.path().string(), test::read_text(e.path()));
    for (const auto& [where, text] : places)
      for (const std::string& line : secret) EXPECT_EQ(text.find(line), std::string::npos) << "a key line in " << where;
  }
  // A second launch re-uses what is deployed (content-addressed): nothing is uploaded again.
  Cli again = run_cli(launch_args(2, "second", true), tmp_);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("deploy node0: skipped meshtrain"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("deploy node1: skipped meshtrain"), std::string::npos) << again.err;
}

// The end-to-end shape once meshtrain has tensor parallelism: dp_shard 2 x tp 2 on 2
// nodes x 2 ranks (tp fastest: each node holds one tp pair).
TEST_F(ClusterRun, LaunchDpShard2Tp2EveryMetricInTheStore) {
  const int steps = 6;
  Cli r = run_cli(launch_args(steps, "dp_shard 2 x tp 2", false, {"--dp-shard", "2", "--tp", "2"}), tmp_);
  if (r.code != 0) {
    std::string why = r.err;
    if (auto s = store::RunStore::open(db_); s.ok())
      if (auto runs = (*s)->list_runs(); runs.ok() && !runs->empty()) why += "\n" + runs->front().exit_reason;
    FAIL() << "exit " << r.code << "\n" << why;
  }
  const store::RunId id = only_run();
  const LaunchRecord rec = record(id);
  ASSERT_EQ(rec.nodes.size(), 2u);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(steps_in_file(rec, rank), steps) << "rank " << rank;
  // Every rank ran in the shape asked for: its start record says dp_shard 2, tp 2.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string text = test::read_text(fs::path(rec.nodes[0].run_dir) / metrics_file(rank));
    auto first = parse_metrics_line(text.substr(0, text.find('\n')));
    ASSERT_TRUE(first.ok()) << text.substr(0, 300);
    const auto* start = std::get_if<StartRecord>(&*first);
    ASSERT_NE(start, nullptr) << "rank " << rank << ": the first line is not a start record";
    EXPECT_EQ(start->mesh[Axis::dp_replicate], 1);
    EXPECT_EQ(start->mesh[Axis::dp_shard], 2);
    EXPECT_EQ(start->mesh[Axis::tp], 2);
  }
  expect_store_equals_files(id, rec);
  auto s = store::RunStore::open(db_);
  auto info = (*s)->get_run(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "ok");
  EXPECT_EQ(info->summary.shape, (MeshShape{1, 2, 1, 2}));
}

TEST_F(ClusterRun, KilledRankStopsEveryRankOnEveryNodeWithRootCause) {
  Cli r = run_cli(launch_args(100000, "to be killed", true), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  const store::RunId id = only_run();
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 2; }, 120s)) << "rank 3 never stepped";
  const pid_t attach = spawn_cli({"attach", std::to_string(id), "--ssh-config", cluster_.ssh_config(),
                                  "--known-hosts", (tmp_ / "known_hosts").string(), "--db", db_.string()},
                                 tmp_);
  std::this_thread::sleep_for(1500ms);
  const auto pids = run_pids(rec);
  ASSERT_GE(pids.size(), 8u);
  const pid_t victim = static_cast<pid_t>(std::stol(test::read_text(fs::path(rec.nodes[1].run_dir) / "rank3.pid")));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const bool all_gone = wait_for([&] {
    return std::none_of(pids.begin(), pids.end(), [](pid_t p) { return alive(p); });
  }, 30s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ measure ] SIGKILL of rank 3 -> every process of both nodes gone after " << secs << " s\n";
  EXPECT_TRUE(all_gone);
  EXPECT_LT(secs, 10.0);
  EXPECT_EQ(wait_exit(attach), 3) << test::read_text(tmp_ / "bg.err");
  auto s = store::RunStore::open(db_);
  auto info = (*s)->get_run(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "failed");
  const std::string& why = info->summary.exit_reason;
  std::cout << "[ root cause ] " << why.substr(0, why.find("rank3.log")) << "\n";
  // The root cause is node 1's exit record, which its supervisor wrote (rank 3 had logged 2
  // steps before the kill).
  test::expect_rank3_killed_on_node1(rec.nodes[1].run_dir, why, "node1", 1);
  EXPECT_NE(why.find("rank3.log"), std::string::npos) << why;  // the failing rank's log tail
  EXPECT_NE(why.find("node1.err"), std::string::npos) << why;  // the stderr tail
  expect_store_equals_files(id, rec);
}

// The run is endless (it is stopped at the end), so each cut lands mid-run however fast or slow
// the machine is; after each cut the stored offset must move past the file's size at the cut
// while the ranks still run: streaming resumed, not merely a backfill at the end.
TEST_F(ClusterRun, CutSshLinkMidRunStreamingResumesExactly) {
  const pid_t launch = spawn_cli(launch_args(100000, "cut link", false), tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  const std::string source = metrics_source(1, 2);
  ASSERT_TRUE(wait_for([&] { return stored_offset(id, source) > 0; }, 120s)) << test::read_text(tmp_ / "bg.err");
  const LaunchRecord rec = record(id);
  const fs::path file = fs::path(rec.nodes[1].run_dir) / metrics_file(2);
  for (int cut = 1; cut <= 2; ++cut) {
    EXPECT_GE(cut_ssh(1), 1) << "cut " << cut;
    const uint64_t size_at_cut = fs::file_size(file);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(wait_for([&] { return stored_offset(id, source) > size_at_cut; }, 60s))
        << "cut " << cut << ": streaming did not resume\n" << test::read_text(tmp_ / "bg.err");
    std::cout << "[ measure ] cut " << cut << ": new lines stored "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s after the cut\n";
    ASSERT_TRUE(alive(launch));
  }
  const auto pids = run_pids(rec);
  EXPECT_TRUE(std::any_of(pids.begin(), pids.end(), [](pid_t p) { return alive(p); })) << "the run ended early";
  Cli s = run_cli({"stop", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--db", db_.string()},
                  tmp_);
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(wait_exit(launch), 3) << test::read_text(tmp_ / "bg.err");  // stopped, not succeeded
  const std::string err = test::read_text(tmp_ / "bg.err");
  EXPECT_NE(err.find("link lost"), std::string::npos) << err;
  expect_store_equals_files(id, rec);
}

// --max-restarts: a rank is killed after a checkpoint; every node starts its ranks again from it
// (on the nodes: the workbench only watches) and the run completes; the store has every step.
TEST_F(ClusterRun, MaxRestartsResumesEveryRankFromTheLatestCheckpoint) {
  const int steps = 24;
  auto args = launch_args(steps, "restarted", false);
  for (const char* a : {"--checkpoint-every", "4", "--max-restarts", "1"}) args.push_back(a);
  const pid_t launch = spawn_cli(args, tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  const LaunchRecord rec = record(id);
  EXPECT_EQ(rec.max_restarts, 1);
  // Kill rank 3 once a checkpoint exists and before the run ends.
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 6; }, 180s)) << test::read_text(tmp_ / "bg.err");
  const int at_kill = steps_in_file(rec, 3);
  ASSERT_LT(at_kill, steps) << "the run ended before the kill; make it longer";
  const pid_t victim = static_cast<pid_t>(std::stol(test::read_text(fs::path(rec.nodes[1].run_dir) / "rank3.pid")));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  EXPECT_EQ(wait_exit(launch), 0) << test::read_text(tmp_ / "bg.err");
  const std::string err = test::read_text(tmp_ / "bg.err");
  EXPECT_NE(err.find("restart 1 of 1 from the latest checkpoint"), std::string::npos) << err;
  for (int node = 0; node < 2; ++node) {
    const std::string restarts =
        test::read_text(fs::path(rec.nodes[node].run_dir) / ("node" + std::to_string(node) + ".restarts"));
    EXPECT_EQ(std::count(restarts.begin(), restarts.end(), '\n'), 1) << "node " << node << ": " << restarts;
    EXPECT_EQ(test::read_text(fs::path(rec.nodes[node].run_dir) / ("node" + std::to_string(node) + ".exit")).substr(0, 2),
              "0 ");
  }
  for (int rank = 0; rank < 4; ++rank) {
    const std::string log = test::read_text(fs::path(rec.nodes[0].run_dir) / rank_log_file(rank));
    EXPECT_NE(log.find("resumed from"), std::string::npos) << "rank " << rank << " did not resume:\n" << log;
  }
  auto s = store::RunStore::open(db_);
  auto info = (*s)->get_run(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "ok") << info->summary.exit_reason;
  EXPECT_EQ(info->summary.steps, steps - 1);
  // Every step of every rank is stored (steps redone after the checkpoint are stored once).
  std::ostringstream csv;
  ASSERT_TRUE((*s)->export_csv(id, csv).ok());
  std::set<std::pair<int, int64_t>> loss_points;
  std::istringstream in(csv.str());
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(",loss,") == std::string::npos) continue;
    std::vector<std::string> c;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) c.push_back(cell);
    loss_points.insert({std::stoi(c[1]), std::stoll(c[2])});
  }
  EXPECT_EQ(loss_points.size(), static_cast<size_t>(4 * steps));
}

TEST_F(ClusterRun, KilledWorkbenchThenAttachBackfillsEverything) {
  const pid_t launch = spawn_cli(launch_args(30, "orphaned", false), tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0);
  ASSERT_TRUE(wait_for([&] { return stored_offset(id, metrics_source(0, 0)) > 0; }, 120s));
  ::kill(launch, SIGKILL);  // the workbench dies; the run must not
  wait_exit(launch);
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] {
    return fs::exists(fs::path(rec.nodes[0].run_dir) / "node0.exit") &&
           fs::exists(fs::path(rec.nodes[1].run_dir) / "node1.exit");
  }, 180s));
  EXPECT_EQ(test::read_text(fs::path(rec.nodes[0].run_dir) / "node0.exit").substr(0, 2), "0 ");
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(steps_in_file(rec, rank), 30);
  Cli a = run_cli({"attach", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--db", db_.string()},
                  tmp_);
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("ok"), std::string::npos);
  expect_store_equals_files(id, rec);
}

TEST_F(ClusterRun, StopEndsEveryProcessAndMarksTheRunStopped) {
  Cli r = run_cli(launch_args(100000, "stopped", true), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  const store::RunId id = only_run();
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 0) >= 1; }, 120s));
  const auto pids = run_pids(rec);
  const auto t0 = std::chrono::steady_clock::now();
  Cli s = run_cli({"stop", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--db", db_.string()},
                  tmp_);
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(wait_for([&] { return std::none_of(pids.begin(), pids.end(), [](pid_t p) { return alive(p); }); }, 15s));
  std::cout << "[ measure ] meshwork stop -> all gone after "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  auto st = store::RunStore::open(db_);
  EXPECT_EQ((*st)->get_run(id)->summary.status, "stopped");
  // Attaching afterwards backfills what was written and keeps the run "stopped", not "failed".
  Cli a = run_cli({"attach", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--db", db_.string()},
                  tmp_);
  EXPECT_EQ(a.code, 3) << a.err;
  EXPECT_EQ((*st)->get_run(id)->summary.status, "stopped");
  expect_store_equals_files(id, rec);
}

TEST_F(ClusterRun, ChangedHostKeyIsRefusedByTheCli) {
  ASSERT_EQ(std::system(("ssh-keygen -q -t ed25519 -N '' -f " + shell_quote((tmp_ / "other").string())).c_str()), 0);
  std::string other = test::read_text(tmp_ / "other.pub");
  other = other.substr(0, other.rfind(' '));
  std::ofstream(tmp_ / "known_hosts") << cluster_.addresses[0] << " " << other << "\n";
  Cli r = run_cli({"probe", "node0", "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--accept-new-host-keys"},
                  tmp_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("cpus"), std::string::npos);
}

}  // namespace
}  // namespace meshwork::remote
