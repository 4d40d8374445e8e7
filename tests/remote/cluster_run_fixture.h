// The namespace-cluster fixture of the end-to-end tests that drive the `meshwork` CLI with the
// real meshtrain (cluster_run_test.cpp, cluster_hang_test.cpp): launch flags, the run's record
// and pids, the store against the trainer's files, and cutting a node's SSH connections.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/metrics.h"
#include "core/shell_quote.h"
#include "core/store/run_store.h"
#include "remote/launch.h"
#include "remote/run_layout.h"
#include "cli_process.h"
#include "test_util.h"

namespace meshwork::remote::test {

using namespace std::chrono_literals;

inline std::string meshtrain_path() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

inline bool meshtrain_usable() {
  const std::string cmd = shell_quote(meshtrain_path()) + " --help 2>&1 | grep -q -- --nproc-per-node";
  return std::system(cmd.c_str()) == 0;
}

class ClusterRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = cluster();
    if (!c) GTEST_SKIP() << "no test cluster (run under ctest: fixture cluster_up)";
    if (!meshtrain_usable()) GTEST_SKIP() << "meshtrain is not built (" << meshtrain_path() << ")";
    cluster_ = *c;
    tmp_ = temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    // Hostile on purpose: quotes, spaces, ';', $(...) and a backquote must all stay inert.
    root_ = tmp_ / "runs it's \"q\"; touch pwned; $(touch pwned2) `touch pwned3`";
    db_ = tmp_ / "runs.db";
  }

  std::vector<std::string> common() const {
    return {"--ssh-config", cluster_.ssh_config(), "--known-hosts", (tmp_ / "known_hosts").string(),
            "--identity", cluster_.identity(), "--accept-new-host-keys", "--db", db_.string()};
  }

  // `shape`: the mesh flags; the default is the 2 x 2 data-parallel mesh meshtrain always had.
  std::vector<std::string> launch_args(int steps, const std::string& name, bool detach,
                                       std::vector<std::string> shape = {"--dp-replicate", "2", "--dp-shard",
                                                                         "2"}) const {
    std::vector<std::string> a = {"launch", "--hosts", "node0,node1", "--nproc-per-node", "2"};
    a.insert(a.end(), shape.begin(), shape.end());
    for (const std::string& s : std::vector<std::string>{"--model", "tiny",
                                  "--steps", std::to_string(steps), "--seq-len", "64", "--global-batch", "4",
                                  "--name", name, "--remote-root", root_.string(),
                                  "--meshtrain", meshtrain_path(), "--master-port",
                                  std::to_string(29000 + (::getpid() + steps) % 900)})
      a.push_back(s);
    if (detach) a.push_back("--detach");
    auto c = common();
    a.insert(a.end(), c.begin(), c.end());
    return a;
  }

  store::RunId only_run() {
    auto s = store::RunStore::open(db_);
    EXPECT_TRUE(s.ok());
    auto runs = (*s)->list_runs();
    EXPECT_TRUE(runs.ok());
    EXPECT_EQ(runs->size(), 1u);
    return runs->empty() ? 0 : runs->front().id;
  }

  LaunchRecord record(store::RunId id) {
    auto s = store::RunStore::open(db_);
    auto info = (*s)->get_run(id);
    EXPECT_TRUE(info.ok());
    auto rec = launch_record_from_json(info->cluster.at("launch"));
    EXPECT_TRUE(rec.ok());
    return *rec;
  }

  // Number of complete step lines in a rank's metrics file.
  int steps_in_file(const LaunchRecord& rec, int rank) {
    const std::string text = read_text(std::filesystem::path(rec.nodes[0].run_dir) / metrics_file(rank));
    int n = 0;
    for (size_t p = 0; (p = text.find("\"type\":\"step\"", p)) != std::string::npos; ++p) ++n;
    return n;
  }

  // The store holds exactly the trainer's files: per source, the offset is the size of the
  // file's complete lines, and every step value of every rank is there once, equal.
  void expect_store_equals_files(store::RunId id, const LaunchRecord& rec) {
    auto s = store::RunStore::open(db_);
    ASSERT_TRUE(s.ok());
    auto sources = (*s)->sources(id);
    ASSERT_TRUE(sources.ok());
    std::map<std::string, uint64_t> offsets;
    for (const auto& src : *sources) offsets[src.name] = src.offset;
    std::map<std::tuple<int, int64_t, std::string>, double> from_files;
    for (size_t node = 0; node < rec.nodes.size(); ++node) {
      for (int k = 0; k < rec.nodes[node].slots; ++k) {
        const int rank = rec.first_rank(node) + k;
        const std::string text = read_text(std::filesystem::path(rec.nodes[node].run_dir) / metrics_file(rank));
        const size_t complete = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        EXPECT_EQ(offsets[metrics_source(static_cast<int>(node), rank)], complete) << "rank " << rank;
        std::istringstream in(text.substr(0, complete));
        std::string line;
        while (std::getline(in, line)) {
          auto rec_line = parse_metrics_line(line);
          ASSERT_TRUE(rec_line.ok()) << line;
          if (auto* step = std::get_if<StepRecord>(&*rec_line)) {
            for (const auto& [key, value] : step_series(*step))
              // The store keeps comm_s.pp and comm_s.ep for pipelined and expert-parallel runs only
              // (docs/store.md).
              if ((key != "comm_s.pp" && key != "comm_s.ep") || value != 0) from_files[{step->rank, step->step, key}] = value;
          }
        }
      }
    }
    std::ostringstream csv;
    ASSERT_TRUE((*s)->export_csv(id, csv).ok());
    std::map<std::tuple<int, int64_t, std::string>, double> from_store;
    std::istringstream in(csv.str());
    std::string line;
    std::getline(in, line);  // header
    int duplicates = 0;
    while (std::getline(in, line)) {
      std::vector<std::string> c;
      std::stringstream ls(line);
      std::string cell;
      while (std::getline(ls, cell, ',')) c.push_back(cell);
      ASSERT_EQ(c.size(), 7u) << line;
      auto key = std::make_tuple(std::stoi(c[1]), std::stoll(c[2]), c[5]);
      if (from_store.count(key)) ++duplicates;
      from_store[key] = std::stod(c[6]);
    }
    EXPECT_EQ(duplicates, 0);
    ASSERT_EQ(from_store.size(), from_files.size());
    for (const auto& [key, value] : from_files) {
      ASSERT_TRUE(from_store.count(key)) << std::get<0>(key) << "/" << std::get<1>(key) << "/" << std::get<2>(key);
      EXPECT_NEAR(from_store[key], value, 1e-9 * std::max(1.0, std::abs(value)));
    }
  }

  void TearDown() override {
    if (tmp_.empty()) return;
    // Nothing the hostile names spelled may exist, anywhere a shell could have run it.
    for (const std::filesystem::path& dir : {tmp_, std::filesystem::path("/root"), std::filesystem::current_path(), root_.parent_path()}) {
      for (const char* f : {"pwned", "pwned2", "pwned3"}) EXPECT_FALSE(std::filesystem::exists(dir / f)) << dir / f;
    }
  }

  // Every process of the run on both nodes: supervisors, ranks and the wrappers' groups.
  std::vector<pid_t> run_pids(const LaunchRecord& rec) {
    std::vector<pid_t> pids;
    const std::filesystem::path dir = rec.nodes[0].run_dir;
    for (const std::string& f : {std::string("supervisor-node0.pid"), std::string("supervisor-node1.pid"),
                                 std::string("node0.pgid"), std::string("node1.pgid"), std::string("rank0.pid"),
                                 std::string("rank1.pid"), std::string("rank2.pid"), std::string("rank3.pid")}) {
      const std::string text = read_text(dir / f);
      if (!text.empty()) pids.push_back(static_cast<pid_t>(std::stol(text)));
    }
    return pids;
  }

  uint64_t stored_offset(store::RunId id, const std::string& source) {
    auto s = store::RunStore::open(db_);
    if (!s) return 0;
    auto off = (*s)->source_offset(id, source);
    return off.ok() ? *off : 0;
  }

  // The run id once `meshwork launch` has recorded it (the store is created by the launch).
  store::RunId wait_run() {
    store::RunId id = 0;
    wait_for([&] {
      if (!std::filesystem::exists(db_)) return false;
      auto s = store::RunStore::open(db_);
      if (!s) return false;
      auto runs = (*s)->list_runs();
      if (!runs || runs->empty()) return false;
      id = runs->front().id;
      return true;
    }, 120s);
    return id;
  }

  // Kills every sshd process of node `i` that serves a connection (not its listeners: the
  // node's sshd and, when the cluster has one, its bare sshd).
  int cut_ssh(int i) {
    const std::string ns = read_text(cluster_.dir / ("node" + std::to_string(i)) / "ns");
    const pid_t listener = std::stoi(read_text(cluster_.dir / ("node" + std::to_string(i)) / "sshd.pid"));
    const std::filesystem::path bare_pid = cluster_.dir / ("node" + std::to_string(i)) / "sshd-bare.pid";
    const pid_t bare_listener = std::filesystem::exists(bare_pid) ? std::stoi(read_text(bare_pid)) : -1;
    const std::string list = (tmp_ / "pids").string();
    std::system(("ip netns pids " + shell_quote(ns.substr(0, ns.find('\n'))) + " > " + shell_quote(list)).c_str());
    std::ifstream in(list);
    int killed = 0;
    pid_t pid;
    while (in >> pid) {
      if (pid == listener || pid == bare_listener) continue;
      const std::string comm = read_text("/proc/" + std::to_string(pid) + "/comm");
      if (comm.rfind("sshd", 0) == 0 && ::kill(pid, SIGKILL) == 0) ++killed;
    }
    return killed;
  }

  Cluster cluster_;
  std::filesystem::path tmp_, root_, db_;
};

}  // namespace meshwork::remote::test
