// Live hang diagnosis end to end on the namespace cluster (two nodes x two ranks, the real
// meshtrain, the `meshwork` CLI as a user runs it): a rank stopped with SIGSTOP mid-run is named
// by `meshwork diagnose RUN --json` (its node, pid, "stopped", its phase) with the collective and
// axis the others wait in, and the diagnosis clears after SIGCONT; a rank killed is named as gone
// with its signal; the culprit's native stack is fetched from its node; a rank slowed by a
// SIGSTOP/SIGCONT duty cycle is named as the straggler, not running, and no other rank is named,
// while the run goes on.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cluster_run_fixture.h"

namespace meshwork::remote {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using test::Cli;
using test::ClusterRun;
using test::run_cli;
using test::spawn_cli;
using test::wait_exit;
using test::wait_for;

constexpr int kHangAfter = 5;  // T for the test; the default is max(60 s, 5 x the median step)

class ClusterHang : public ClusterRun {
 protected:
  nlohmann::json diagnose(store::RunId id, int* code = nullptr) {
    Cli r = run_cli({"diagnose", std::to_string(id), "--json", "--hang-after", std::to_string(kHangAfter), "--db",
                     db_.string()},
                    tmp_);
    if (code) *code = r.code;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j : nlohmann::json{{"state", "unparsed"}, {"out", r.out}, {"err", r.err}};
  }

  // Launches an endless run of `shape` (detached) and follows it with `meshwork attach`, as a
  // workbench would; returns the attach process.
  pid_t launch_and_follow(const std::string& name, const std::vector<std::string>& shape, store::RunId& id) {
    auto args = launch_args(100000, name, true, shape);
    args.push_back("--collective-timeout");
    args.push_back("600");  // the watchdog stays out of this test
    Cli r = run_cli(args, tmp_);
    EXPECT_EQ(r.code, 0) << r.err;
    id = only_run();
    return spawn_cli({"attach", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                      (tmp_ / "known_hosts").string(), "--db", db_.string()},
                     tmp_);
  }

  void stop_and_wait(store::RunId id, pid_t attach) {
    Cli stop = run_cli({"stop", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                        (tmp_ / "known_hosts").string(), "--db", db_.string()},
                       tmp_);
    EXPECT_EQ(stop.code, 0) << stop.err;
    wait_exit(attach);
  }

  // Whatever a failed assertion skipped: the stopped rank continued, the endless run stopped,
  // the follower gone (it would hold the test cluster's lock).
  struct Cleanup {
    ClusterHang* t;
    store::RunId id;
    pid_t attach;
    pid_t victim = 0;
    bool done = false;
    ~Cleanup() {
      if (victim > 0) ::kill(victim, SIGCONT);
      if (done) return;
      t->stop_and_wait(id, attach);
      if (test::alive(attach)) ::kill(attach, SIGKILL);
    }
  };

  // SIGSTOP rank 3 (node 1) mid-run: the diagnosis names it within T + 10 s; SIGCONT clears it.
  void stop_rank3_and_expect_it_named(const std::string& name, const std::vector<std::string>& shape) {
    store::RunId id = 0;
    const pid_t attach = launch_and_follow(name, shape, id);
    Cleanup cleanup{this, id, attach};
    const LaunchRecord rec = record(id);
    ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 12; }, 180s)) << "rank 3 never stepped";
    int code = -1;
    // Running: not hung. (Four ranks share two cores here, so a straggler named by their jitter
    // is possible and not what this test is about.)
    nlohmann::json healthy = diagnose(id, &code);
    EXPECT_TRUE(healthy["state"] == "healthy" || healthy["state"] == "straggler") << healthy.dump();

    const pid_t victim = static_cast<pid_t>(std::stol(test::read_text(fs::path(rec.nodes[1].run_dir) / "rank3.pid")));
    ASSERT_EQ(::kill(victim, SIGSTOP), 0);
    cleanup.victim = victim;
    const auto t0 = std::chrono::steady_clock::now();
    nlohmann::json d;
    const bool named = wait_for([&] {
      d = diagnose(id, &code);
      return d["state"] == "hang" && !d["culprits"].empty() && !d["waiting"].empty();
    }, std::chrono::seconds(kHangAfter + 10 + 5));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ measure ] " << name << ": SIGSTOP of rank 3 -> diagnosed after " << secs << " s (T = " << kHangAfter
              << " s)\n[ diagnosis ] " << d.value("summary", d.dump()) << "\n";
    ::kill(victim, SIGCONT);
    ASSERT_TRUE(named) << d.dump(2);
    EXPECT_LE(secs, kHangAfter + 10.0);
    EXPECT_EQ(code, 3);
    ASSERT_EQ(d["culprits"].size(), 1u) << d.dump(2);
    const nlohmann::json& c = d["culprits"][0];
    EXPECT_EQ(c["rank"], 3);
    EXPECT_EQ(c["node"], 1);
    EXPECT_EQ(c["pid"], victim);
    EXPECT_EQ(c["process"], "stopped");
    EXPECT_FALSE(c["phase"].get<std::string>().empty());
    // Every waiting group waits on rank 3 or on a rank that does (rank 3 is their only culprit),
    // in a collective of the run's axes.
    std::set<std::string> axes;
    for (const auto& w : d["waiting"]) {
      axes.insert(w["axis"].get<std::string>());
      EXPECT_FALSE(w["op"].get<std::string>().empty());
      EXPECT_GT(w["seq"].get<int64_t>(), 0);
      for (int r : w["ranks"]) EXPECT_NE(r, 3);
    }
    EXPECT_FALSE(axes.empty());

    // The culprit's stack, from its node.
    Cli stack = run_cli({"diagnose", std::to_string(id), "--stack", "3", "--ssh-config", cluster_.ssh_config(),
                         "--known-hosts", (tmp_ / "known_hosts").string(), "--db", db_.string()},
                        tmp_);
    EXPECT_EQ(stack.code, 0) << stack.err;
    EXPECT_NE(stack.out.find("rank 3 on node 1"), std::string::npos) << stack.out;
    EXPECT_NE(stack.out.find("last lines of rank3.log"), std::string::npos) << stack.out;

    // SIGCONT (above): the run goes on and the diagnosis clears.
    const int before = steps_in_file(rec, 3);
    EXPECT_TRUE(wait_for([&] { return steps_in_file(rec, 3) > before + 1; }, 60s)) << "rank 3 did not go on";
    EXPECT_TRUE(wait_for([&] { return diagnose(id)["state"] != "hang"; }, 30s)) << diagnose(id).dump(2);
    cleanup.done = true;
    stop_and_wait(id, attach);
  }
};

TEST_F(ClusterHang, StoppedRankIsNamedWithTheCollectiveOthersWaitIn_DpShard2Tp2) {
  stop_rank3_and_expect_it_named("hang dp_shard x tp", {"--dp-shard", "2", "--tp", "2"});
}

TEST_F(ClusterHang, StoppedRankIsNamedWithTheCollectiveOthersWaitIn_Pp2Tp2) {
  stop_rank3_and_expect_it_named("hang pp x tp", {"--pp", "2", "--tp", "2"});
}

TEST_F(ClusterHang, KilledRankIsNamedGoneWithItsSignal) {
  store::RunId id = 0;
  const pid_t attach = launch_and_follow("killed", {"--dp-shard", "2", "--tp", "2"}, id);
  Cleanup cleanup{this, id, attach};
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 2; }, 180s)) << "rank 3 never stepped";
  const pid_t victim = static_cast<pid_t>(std::stol(test::read_text(fs::path(rec.nodes[1].run_dir) / "rank3.pid")));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  EXPECT_EQ(wait_exit(attach), 3);
  cleanup.done = true;
  int code = -1;
  const nlohmann::json d = diagnose(id, &code);
  std::cout << "[ diagnosis ] " << d.value("summary", d.dump()) << "\n";
  EXPECT_EQ(d["state"], "failed") << d.dump(2);
  EXPECT_EQ(code, 3);
  ASSERT_EQ(d["culprits"].size(), 1u) << d.dump(2);
  EXPECT_EQ(d["culprits"][0]["rank"], 3);
  EXPECT_EQ(d["culprits"][0]["node"], 1);
  EXPECT_EQ(d["culprits"][0]["process"], "gone");
  EXPECT_NE(d["culprits"][0]["ended"].get<std::string>().find("signal"), std::string::npos) << d.dump(2);
}

// Stops `pid` for `stopped` of every `period` from a thread of its own until destroyed; the
// process is always left running (SIGCONT) however the test ends.
class DutyCycle {
 public:
  DutyCycle(pid_t pid, std::chrono::milliseconds stopped, std::chrono::milliseconds period)
      : pid_(pid), thread_([this, stopped, period] {
          while (!quit_) {
            ::kill(pid_, SIGSTOP);
            std::this_thread::sleep_for(stopped);
            ::kill(pid_, SIGCONT);
            std::this_thread::sleep_for(period - stopped);
          }
        }) {}
  ~DutyCycle() { end(); }
  void end() {
    quit_ = true;
    if (thread_.joinable()) thread_.join();
    ::kill(pid_, SIGCONT);
  }

 private:
  pid_t pid_;
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

TEST_F(ClusterHang, RankSlowedByAStopContDutyCycleIsNamedTheStragglerWhileTheRunGoesOn) {
  store::RunId id = 0;
  const pid_t attach = launch_and_follow("straggler", {"--dp-shard", "2", "--tp", "2"}, id);
  Cleanup cleanup{this, id, attach};
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 12; }, 180s)) << "rank 3 never stepped";
  const pid_t victim = static_cast<pid_t>(std::stol(test::read_text(fs::path(rec.nodes[1].run_dir) / "rank3.pid")));
  cleanup.victim = victim;  // SIGCONT by the Cleanup too, after the cycle below has ended
  auto cycle = std::make_unique<DutyCycle>(victim, 150ms, 300ms);
  int code = -1;
  nlohmann::json d;
  auto rank3_straggles = [&](const nlohmann::json& j) {
    if (j["state"] != "straggler") return false;
    for (const auto& s : j["stragglers"])
      if (s["rank"] == 3) return true;
    return false;
  };
  // The medians are over the last 10 steps: named once most of them ran under the cycle.
  const bool named = wait_for([&] {
    d = diagnose(id, &code);
    return rank3_straggles(d);
  }, 180s);
  const int steps_then = steps_in_file(rec, 3);
  std::cout << "[ diagnosis ] " << d.value("summary", d.dump()) << "\n";
  ASSERT_TRUE(named) << d.dump(2);
  EXPECT_EQ(code, 3);
  EXPECT_LT(d["silent_s"].get<double>(), kHangAfter);
  // The run is alive: slow, not hung; nobody is blamed for a hang.
  EXPECT_TRUE(d["culprits"].empty()) << d.dump(2);
  EXPECT_TRUE(d["waiting"].empty()) << d.dump(2);
  // Rank 3 alone is named, on its node, not running: its peers waited on it (tiny on CPU spends
  // most of its step inside tp collectives, so most stops land inside one, where its own wait
  // timer runs as theirs do) while it used no more CPU time than they did. Its peers that wait on
  // it (ranks 1 and 3 form a dp_shard group, 2 and 3 a tp group) and rank 0, which waits on
  // rank 2, are not named.
  ASSERT_EQ(d["stragglers"].size(), 1u) << d.dump(2);
  const nlohmann::json& s = d["stragglers"][0];
  EXPECT_EQ(s["rank"], 3);
  EXPECT_EQ(s["node"], 1);
  EXPECT_EQ(s["slow_in"], "not running") << d.dump(2);
  EXPECT_GT(s["seconds"].get<double>(), s["median_s"].get<double>()) << d.dump(2);
  const std::string others = s["others_wait_on"];
  EXPECT_TRUE(others == "tp" || others == "dp_shard") << d.dump(2);
  EXPECT_NE(d["summary"].get<std::string>().find("rank 3 (node1"), std::string::npos) << d.dump(2);

  // Running freely again, it steps on and is named no more.
  cycle->end();
  EXPECT_TRUE(wait_for([&] { return steps_in_file(rec, 3) > steps_then + 1; }, 60s)) << "rank 3 did not go on";
  EXPECT_TRUE(wait_for([&] { return !rank3_straggles(diagnose(id)); }, 180s)) << diagnose(id).dump(2);
  cleanup.done = true;
  stop_and_wait(id, attach);
}

}  // namespace
}  // namespace meshwork::remote
