// End to end on the namespace cluster with the real meshtrain, driven through the `meshwork` CLI
// as a user would: launch, faults (a killed rank, a cut SSH link, a killed workbench), attach,
// changed host keys, and hostile names. Every run's remote root is a path with spaces, quotes,
// ';' and $(...), so every command line of the launcher is exercised against injection.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include "core/metrics.h"
#include "core/store/run_store.h"
#include "remote/launch.h"
#include "remote/run_layout.h"
#include "remote/shell_quote.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string meshtrain_path() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

bool meshtrain_usable() {
  const std::string cmd = shell_quote(meshtrain_path()) + " --help 2>&1 | grep -q -- --nproc-per-node";
  return std::system(cmd.c_str()) == 0;
}

struct Cli {
  int code = -1;
  std::string out, err;
};

// Runs `meshwork ARGS...` to completion.
Cli run_cli(const std::vector<std::string>& args, const fs::path& tmp) {
  std::vector<std::string> argv = {std::string(MESHWORK_BIN_DIR) + "/meshwork"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string cmd = shell_join(argv) + " > " + shell_quote((tmp / "cli.out").string()) + " 2> " +
                          shell_quote((tmp / "cli.err").string());
  Cli r;
  const int st = std::system(cmd.c_str());
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = test::read_text(tmp / "cli.out");
  r.err = test::read_text(tmp / "cli.err");
  return r;
}

// Starts `meshwork ARGS...` in the background; stdout/stderr to files. Returns its pid.
pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& tmp) {
  std::vector<std::string> argv = {std::string(MESHWORK_BIN_DIR) + "/meshwork"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string cmd = "exec " + shell_join(argv) + " > " + shell_quote((tmp / "bg.out").string()) + " 2> " +
                          shell_quote((tmp / "bg.err").string());
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

class ClusterRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = test::cluster();
    if (!c) GTEST_SKIP() << "no test cluster (run under ctest: fixture cluster_up)";
    if (!meshtrain_usable()) GTEST_SKIP() << "meshtrain is not built (" << meshtrain_path() << ")";
    cluster_ = *c;
    tmp_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    // Hostile on purpose: quotes, spaces, ';', $(...) and a backquote must all stay inert.
    root_ = tmp_ / "runs it's \"q\"; touch pwned; $(touch pwned2) `touch pwned3`";
    db_ = tmp_ / "runs.db";
  }

  std::vector<std::string> common() const {
    return {"--ssh-config", cluster_.ssh_config(), "--known-hosts", (tmp_ / "known_hosts").string(),
            "--identity", cluster_.identity(), "--accept-new-host-keys", "--db", db_.string()};
  }

  std::vector<std::string> launch_args(int steps, const std::string& name, bool detach) const {
    std::vector<std::string> a = {"launch", "--hosts", "node0,node1", "--nproc-per-node", "2",
                                  "--dp-replicate", "2", "--dp-shard", "2", "--model", "tiny",
                                  "--steps", std::to_string(steps), "--seq-len", "64", "--global-batch", "4",
                                  "--name", name, "--remote-root", root_.string(),
                                  "--meshtrain", meshtrain_path(), "--master-port",
                                  std::to_string(29000 + (::getpid() + steps) % 900)};
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
    const std::string text = test::read_text(fs::path(rec.nodes[0].run_dir) / metrics_file(rank));
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
        const std::string text = test::read_text(fs::path(rec.nodes[node].run_dir) / metrics_file(rank));
        const size_t complete = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        EXPECT_EQ(offsets[metrics_source(static_cast<int>(node), rank)], complete) << "rank " << rank;
        std::istringstream in(text.substr(0, complete));
        std::string line;
        while (std::getline(in, line)) {
          auto rec_line = parse_metrics_line(line);
          ASSERT_TRUE(rec_line.ok()) << line;
          if (auto* step = std::get_if<StepRecord>(&*rec_line)) {
            for (const auto& [key, value] : step_series(*step)) from_files[{step->rank, step->step, key}] = value;
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
    for (const fs::path& dir : {tmp_, fs::path("/root"), fs::current_path(), root_.parent_path()}) {
      for (const char* f : {"pwned", "pwned2", "pwned3"}) EXPECT_FALSE(fs::exists(dir / f)) << dir / f;
    }
  }

  test::Cluster cluster_;
  fs::path tmp_, root_, db_;
};

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
  // A second launch re-uses what is deployed (content-addressed): nothing is uploaded again.
  Cli again = run_cli(launch_args(2, "second", true), tmp_);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("deploy node0: skipped meshtrain"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("deploy node1: skipped meshtrain"), std::string::npos) << again.err;
}

}  // namespace
}  // namespace meshwork::remote
