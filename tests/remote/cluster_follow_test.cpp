// Following through the node-side tail (`meshtrain tail`, one stream per node) on the namespace
// cluster, with the real meshtrain and sshd: the tail killed mid-stream loses and duplicates
// nothing; a node whose meshtrain has no tail is followed by files instead; a node whose link is
// cut is declared lost after FollowOptions::lost_after, and never in a plain follow.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/store/run_store.h"
#include "remote/follower.h"
#include "remote/launch.h"
#include "remote/run_control.h"
#include "remote/run_layout.h"
#include "core/shell_quote.h"
#include "cli_process.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string meshtrain_path() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

std::string step_line(int rank, int step) {
  // loss is unique per (rank, step), so a value stored twice or mixed up would show.
  return "{\"v\":1,\"type\":\"step\",\"step\":" + std::to_string(step) + ",\"rank\":" + std::to_string(rank) +
         ",\"time\":1795336867.5,\"loss\":" + std::to_string(rank * 100000 + step) + ".25}\n";
}

void append(const fs::path& p, const std::string& text) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0) << p;
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

class ClusterFollow : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = test::cluster();
    if (!c) GTEST_SKIP() << "no test cluster (run under ctest: fixture cluster_up)";
    if (!fs::exists(meshtrain_path())) GTEST_SKIP() << "meshtrain is not built (" << meshtrain_path() << ")";
    cluster_ = *c;
    tmp_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    run_dir_ = tmp_ / "run dir";  // a space: the tail's command line is quoted
    fs::create_directories(run_dir_);
    db_ = tmp_ / "runs.db";
    // Two nodes of four ranks, one run directory on the shared filesystem (as the launcher
    // lays it out): ranks 0-3 on node0, 4-7 on node1.
    rec_.nodes = {{"node0", 4, run_dir_.string(), ""}, {"node1", 4, run_dir_.string(), ""}};
    rec_.trainer = "meshtrain";
    auto s = store::RunStore::open(db_);
    ASSERT_TRUE(s.ok());
    auto id = (*s)->create_run("follow", nlohmann::json::object(), nlohmann::json{{"launch", to_json(rec_)}});
    ASSERT_TRUE(id.ok());
    run_ = *id;
    // The nodes' supervisors, as far as liveness goes: one process group that runs until the
    // test ends or a stop ends it (its pid in node<i>.pgid, as the launcher records it). The
    // ranks are this test. Started by a process of its own that reaps it, as the node's wrapper
    // does: a zombie would still count as running.
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    wrapper_ = fork();
    if (wrapper_ == 0) {
      ::close(pipe_fds[0]);
      const pid_t supervisor = fork();
      if (supervisor == 0) {
        setpgid(0, 0);
        execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
        _exit(127);
      }
      setpgid(supervisor, supervisor);
      if (::write(pipe_fds[1], &supervisor, sizeof supervisor) != static_cast<ssize_t>(sizeof supervisor)) _exit(1);
      ::close(pipe_fds[1]);
      waitpid(supervisor, nullptr, 0);
      _exit(0);
    }
    ::close(pipe_fds[1]);
    ASSERT_GT(wrapper_, 0);
    const ssize_t got = ::read(pipe_fds[0], &supervisor_, sizeof supervisor_);
    ::close(pipe_fds[0]);
    ASSERT_EQ(got, static_cast<ssize_t>(sizeof supervisor_));
    ASSERT_GT(supervisor_, 0);
    for (int node = 0; node < 2; ++node) append(run_dir_ / node_file(node, ".pgid"), std::to_string(supervisor_) + "\n");
  }

  void TearDown() override {
    restore_link();  // the other tests need every node
    if (supervisor_ > 0) ::kill(-supervisor_, SIGKILL);  // its group; a stop may have ended it
    if (wrapper_ > 0) waitpid(wrapper_, nullptr, 0);
  }

  FollowOptions options(FollowTransport t) {
    FollowOptions o;
    o.transport = t;
    o.poll = 100ms;
    o.heartbeat = 500ms;
    o.on_event = [this](const std::string& level, const std::string& text) {
      std::lock_guard lock(events_mu_);
      events_ += level + ": " + text + "\n";
    };
    return o;
  }

  std::string events() {
    std::lock_guard lock(events_mu_);
    return events_;
  }

  // One line per rank of step `step`, as the ranks write them.
  void write_all_ranks(int step) {
    for (int rank = 0; rank < 8; ++rank) append(run_dir_ / metrics_file(rank), step_line(rank, step));
  }

  // Node i's link cut: the host side of its veth down (tests/cluster/cluster.sh: "v<tag><i>", its
  // namespace "mw<tag>-n<i>"); its sshd and processes go on, nothing reaches them.
  void cut_link(int i) {
    const std::string ns = test::read_text(cluster_.dir / ("node" + std::to_string(i)) / "ns");
    cut_veth_ = "v" + ns.substr(2, ns.find("-n") - 2) + std::to_string(i);
    ASSERT_EQ(std::system(("ip link set " + cut_veth_ + " down").c_str()), 0) << cut_veth_;
  }

  void restore_link() {
    if (cut_veth_.empty()) return;
    EXPECT_EQ(std::system(("ip link set " + cut_veth_ + " up").c_str()), 0) << cut_veth_;
    cut_veth_.clear();
  }

  uint64_t stored_offset(const std::string& source) {
    auto s = store::RunStore::open(db_);
    if (!s) return 0;
    auto off = (*s)->source_offset(run_, source);
    return off.ok() ? *off : 0;
  }

  // The pids of the follow tails running in node i's network namespace.
  std::vector<pid_t> tails_on(int i) {
    const std::string ns = test::read_text(cluster_.dir / ("node" + std::to_string(i)) / "ns");
    const std::string list = (tmp_ / "pids").string();
    std::system(("ip netns pids " + shell_quote(ns.substr(0, ns.find('\n'))) + " > " + shell_quote(list)).c_str());
    std::ifstream in(list);
    std::vector<pid_t> out;
    pid_t pid;
    while (in >> pid) {
      const std::string cmd = test::read_text("/proc/" + std::to_string(pid) + "/cmdline");
      if (cmd.find(std::string("\0tail\0", 6)) != std::string::npos && cmd.find("--heartbeat-ms") != std::string::npos)
        out.push_back(pid);
    }
    return out;
  }

  // Every rank's file is in the store exactly once: the offset is the file's size and each
  // (rank, step) has one loss, the file's.
  void expect_store_equals_files(int steps) {
    auto s = store::RunStore::open(db_);
    ASSERT_TRUE(s.ok());
    std::ostringstream csv;
    ASSERT_TRUE((*s)->export_csv(run_, csv).ok());
    std::map<std::pair<int, int64_t>, std::vector<double>> loss;
    std::istringstream in(csv.str());
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<std::string> c;
      std::stringstream ls(line);
      std::string cell;
      while (std::getline(ls, cell, ',')) c.push_back(cell);
      ASSERT_EQ(c.size(), 7u) << line;
      if (c[5] == "loss") loss[{std::stoi(c[1]), std::stoll(c[2])}].push_back(std::stod(c[6]));
    }
    for (size_t node = 0; node < rec_.nodes.size(); ++node) {
      for (int k = 0; k < rec_.nodes[node].slots; ++k) {
        const int rank = rec_.first_rank(node) + k;
        EXPECT_EQ(stored_offset(metrics_source(static_cast<int>(node), rank)),
                  fs::file_size(run_dir_ / metrics_file(rank)))
            << "rank " << rank;
        for (int step = 0; step < steps; ++step) {
          const auto& v = loss[{rank, step}];
          ASSERT_EQ(v.size(), 1u) << "rank " << rank << " step " << step;
          EXPECT_DOUBLE_EQ(v[0], rank * 100000 + step + 0.25);
        }
      }
    }
    EXPECT_EQ(loss.size(), static_cast<size_t>(8 * steps));
  }

  test::Cluster cluster_;
  fs::path tmp_, run_dir_, db_;
  LaunchRecord rec_;
  store::RunId run_ = 0;
  pid_t wrapper_ = -1;     // reaps supervisor_
  pid_t supervisor_ = -1;  // the nodes' process group
  std::string cut_veth_;  // set while a node's link is cut (cut_link): TearDown brings it back
  std::mutex events_mu_;
  std::string events_;
};

// The ranks write while the tail on each node is killed (SIGKILL, on the node) in the middle of
// a burst of lines: the follower notices (EOF), starts a new tail from the store's offsets and
// the store ends up with every line once. A half-written line at the kill is completed after.
TEST_F(ClusterFollow, KilledTailMidStreamLosesAndDuplicatesNothing) {
  fs::create_symlink(meshtrain_path(), run_dir_ / "meshtrain");
  // Steps [0, 100) paced, then (once the stream runs) a burst up to 3100 that the tail is still
  // sending when it is killed, then half a line, then (after the kill) paced steps to 3200.
  const int paced = 100, burst_end = 3100, steps = 3200;
  std::mutex mu;
  std::condition_variable cv;
  bool go = false, killed = false;
  std::thread ranks([&] {
    auto write_step = [&](int step) {
      for (int rank = 0; rank < 8; ++rank) append(run_dir_ / metrics_file(rank), step_line(rank, step));
    };
    for (int step = 0; step < paced; ++step) {
      write_step(step);
      std::this_thread::sleep_for(5ms);  // the ranks' pace: lines keep arriving during the follow
    }
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return go; });
    }
    for (int step = paced; step < burst_end; ++step) write_step(step);
    const std::string half = step_line(5, burst_end);
    for (int rank = 0; rank < 8; ++rank) {
      const std::string l = step_line(rank, burst_end);
      append(run_dir_ / metrics_file(rank), rank == 5 ? l.substr(0, l.size() / 2) : l);
    }
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return killed; });
    }
    append(run_dir_ / metrics_file(5), half.substr(half.size() / 2));
    for (int step = burst_end + 1; step < steps; ++step) {
      write_step(step);
      std::this_thread::sleep_for(5ms);
    }
    for (int node = 0; node < 2; ++node) append(run_dir_ / node_file(node, ".exit"), "0 1795336900\n");
  });

  SshOptions ssh = cluster_.options(tmp_ / "known_hosts");
  RunFollower follower(db_, run_, rec_, make_connector(rec_, ssh), options(FollowTransport::stream));
  std::atomic<bool> finished{false};
  Result<FollowOutcome> outcome = Error{"follow", "", "did not run"};
  std::thread follow([&] {
    outcome = follower.run();
    finished = true;
  });

  // The stream runs on both nodes: then the burst, and the kill while it flows.
  EXPECT_TRUE(test::wait_for([&] { return stored_offset(metrics_source(0, 0)) > 0 && stored_offset(metrics_source(1, 4)) > 0; }, 60s))
      << events();
  EXPECT_TRUE(test::wait_for([&] { return tails_on(0).size() == 1 && tails_on(1).size() == 1; }, 60s)) << events();
  const uint64_t before_burst = fs::file_size(run_dir_ / metrics_file(5));
  {
    std::lock_guard lock(mu);
    go = true;
  }
  cv.notify_all();
  EXPECT_TRUE(test::wait_for([&] { return stored_offset(metrics_source(1, 5)) > before_burst; }, 60s)) << events();
  const uint64_t at_kill = stored_offset(metrics_source(1, 5));
  for (int node = 0; node < 2; ++node) {
    for (pid_t p : tails_on(node)) EXPECT_EQ(::kill(p, SIGKILL), 0) << "node " << node;
  }
  {
    std::lock_guard lock(mu);
    killed = true;
  }
  cv.notify_all();
  ranks.join();
  if (!test::wait_for([&] { return finished.load(); }, 120s)) follower.detach();
  follow.join();

  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  EXPECT_EQ(outcome->state, FollowOutcome::State::succeeded) << events();
  EXPECT_GE(outcome->reconnects, 2) << events();  // one per killed tail
  EXPECT_NE(events().find("link lost"), std::string::npos) << events();
  EXPECT_LT(at_kill, fs::file_size(run_dir_ / metrics_file(5)));  // the kill was mid-stream
  expect_store_equals_files(steps);
}

// An older meshtrain (no `tail`: it refuses the word, exit 2) is followed by files instead.
TEST_F(ClusterFollow, NodeWithoutTailFallsBackToFiles) {
  {
    std::ofstream old(run_dir_ / "meshtrain");
    old << "#!/bin/sh\necho \"meshtrain: $1: unknown option\" >&2\nexit 2\n";
  }
  fs::permissions(run_dir_ / "meshtrain", fs::perms::owner_all);
  const int steps = 50;
  for (int step = 0; step < steps; ++step) {
    for (int rank = 0; rank < 8; ++rank) append(run_dir_ / metrics_file(rank), step_line(rank, step));
  }
  for (int node = 0; node < 2; ++node) append(run_dir_ / node_file(node, ".exit"), "0 1795336900\n");
  SshOptions ssh = cluster_.options(tmp_ / "known_hosts");
  RunFollower follower(db_, run_, rec_, make_connector(rec_, ssh), options(FollowTransport::automatic));
  auto outcome = follower.run();
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  EXPECT_EQ(outcome->state, FollowOutcome::State::succeeded) << events();
  EXPECT_NE(events().find("following its files one by one"), std::string::npos) << events();
  EXPECT_NE(events().find("unknown option"), std::string::npos) << events();
  expect_store_equals_files(steps);
}

// Node 1's link cut (the host side of its veth down; the tests' own "ranks" go on writing):
// with lost_after the follower declares it lost once nothing came from it for that long, its
// stream silent and its reconnects failing, with the cause in words; node 0 is stopped and the
// follow ends failed with node 1 as the root cause.
TEST_F(ClusterFollow, NodeCutOffIsLostAfterTheLimitWithTheCauseInWords) {
  fs::create_symlink(meshtrain_path(), run_dir_ / "meshtrain");
  for (int step = 0; step < 10; ++step) write_all_ranks(step);
  SshOptions ssh = cluster_.options(tmp_ / "known_hosts");
  ssh.connect_timeout = 2s;  // a reconnect to the cut node fails within the limit
  FollowOptions o = options(FollowTransport::stream);
  o.lost_after = 5s;
  o.stop_grace = 1000ms;
  RunFollower follower(db_, run_, rec_, make_connector(rec_, ssh), o);
  std::atomic<bool> finished{false};
  Result<FollowOutcome> outcome = Error{"follow", "", "did not run"};
  std::thread follow([&] {
    outcome = follower.run();
    finished = true;
  });
  EXPECT_TRUE(test::wait_for([&] { return stored_offset(metrics_source(1, 4)) > 0 && stored_offset(metrics_source(0, 0)) > 0; }, 60s))
      << events();
  cut_link(1);
  const auto cut = std::chrono::steady_clock::now();
  const bool ended = test::wait_for([&] { return finished.load(); }, 60s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count();
  if (!ended) follower.detach();
  follow.join();
  ASSERT_TRUE(ended) << events();
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  EXPECT_EQ(outcome->state, FollowOutcome::State::failed) << events();
  ASSERT_TRUE(outcome->root_cause.has_value()) << events();
  const RootCause& rc = *outcome->root_cause;
  EXPECT_EQ(rc.node, 1u);
  EXPECT_TRUE(rc.unreachable);
  const std::string text = rc.text();
  EXPECT_NE(text.find("node 1 (node1): unreachable for "), std::string::npos) << text;
  EXPECT_NE(text.find(" s: its link is lost; its processes may still run"), std::string::npos) << text;
  EXPECT_NE(text.find("declared lost by the follower after 5 s without contact"), std::string::npos) << text;
  const std::string ev = events();
  EXPECT_NE(ev.find("warning: node 1 (node1): link lost"), std::string::npos) << ev;  // the stream first
  EXPECT_NE(ev.find("error: node 1 (node1) unreachable for "), std::string::npos) << ev;
  EXPECT_EQ(ev.find("node 0 (node0) unreachable"), std::string::npos) << ev;
  // Not before the limit, counted from the last byte (a heartbeat every 500 ms before the cut).
  EXPECT_GE(secs, 5.0 - 1.0);
  auto s = store::RunStore::open(db_);
  ASSERT_TRUE(s.ok());
  auto info = (*s)->get_run(run_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "failed");
  EXPECT_NE(info->summary.exit_reason.find("its link is lost"), std::string::npos) << info->summary.exit_reason;
  std::cout << "[ measure ] declared lost " << secs << " s after the cut (lost_after 5 s): " << text.substr(0, text.find('\n'))
            << "\n";
}

// The same cut in a plain follow (lost_after 0): the follower keeps reconnecting for longer than
// that limit, declares nothing lost, and once the link is back it goes on from the store's
// offsets to the run's end, every line stored once.
TEST_F(ClusterFollow, PlainFollowKeepsReconnectingToANodeCutOffAndGoesOnWhenItIsBack) {
  fs::create_symlink(meshtrain_path(), run_dir_ / "meshtrain");
  for (int step = 0; step < 10; ++step) write_all_ranks(step);
  SshOptions ssh = cluster_.options(tmp_ / "known_hosts");
  ssh.connect_timeout = 2s;
  FollowOptions o = options(FollowTransport::stream);
  ASSERT_EQ(o.lost_after.count(), 0);  // the default: never
  RunFollower follower(db_, run_, rec_, make_connector(rec_, ssh), o);
  std::atomic<bool> finished{false};
  Result<FollowOutcome> outcome = Error{"follow", "", "did not run"};
  std::thread follow([&] {
    outcome = follower.run();
    finished = true;
  });
  EXPECT_TRUE(test::wait_for([&] { return stored_offset(metrics_source(1, 4)) > 0 && stored_offset(metrics_source(0, 0)) > 0; }, 60s))
      << events();
  cut_link(1);
  const auto cut = std::chrono::steady_clock::now();
  for (int step = 10; step < 20; ++step) write_all_ranks(step);  // written while node 1 is cut off
  EXPECT_TRUE(test::wait_for([&] { return events().find("node 1 (node1): link lost") != std::string::npos; }, 30s))
      << events();
  // Twice the other test's limit, reconnects failing all along.
  std::this_thread::sleep_until(cut + 10s);
  EXPECT_FALSE(finished.load()) << events();
  EXPECT_EQ(events().find("unreachable for"), std::string::npos) << events();
  restore_link();
  for (int step = 20; step < 30; ++step) write_all_ranks(step);
  for (int node = 0; node < 2; ++node) append(run_dir_ / node_file(node, ".exit"), "0 1795336900\n");
  if (!test::wait_for([&] { return finished.load(); }, 60s)) follower.detach();
  follow.join();
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  EXPECT_EQ(outcome->state, FollowOutcome::State::succeeded) << events();
  EXPECT_FALSE(outcome->root_cause.has_value());
  expect_store_equals_files(30);
}

}  // namespace
}  // namespace meshwork::remote
