// `meshwork launch --local`: the same launch, stream and store path for "this machine" without
// SSH (the workbench's default cluster), with the real meshtrain: 2 ranks (dp_shard 2) into a run
// root whose name carries quotes, spaces, ';' and $(...). The store must equal the trainer's files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <map>
#include <sstream>
#include <tuple>

#include "core/metrics.h"
#include "core/store/run_store.h"
#include "remote/launch.h"
#include "remote/run_layout.h"
#include "core/shell_quote.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

namespace fs = std::filesystem;

std::string meshtrain() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

int meshwork(std::vector<std::string> args, const fs::path& tmp) {
  args.insert(args.begin(), std::string(MESHWORK_BIN_DIR) + "/meshwork");
  const std::string cmd = shell_join(args) + " > " + shell_quote((tmp / "out").string()) + " 2> " +
                          shell_quote((tmp / "err").string());
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool alive(pid_t pid) {
  const std::string stat = test::read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

TEST(LocalRun, LaunchLocalTwoRanksEveryMetricInTheStore) {
  ASSERT_TRUE(fs::exists(meshtrain())) << meshtrain() << " is not built";
  const fs::path tmp = test::temp_dir("local-run");
  const fs::path root = tmp / "runs it's \"q\"; touch pwned; $(touch pwned2)";
  const fs::path db = tmp / "runs.db";
  const int steps = 5;
  const std::vector<std::string> argv = {
      std::string(MESHWORK_BIN_DIR) + "/meshwork", "launch", "--local", "--nproc-per-node", "2", "--dp-shard", "2",
      "--model", "tiny", "--steps", std::to_string(steps), "--seq-len", "64", "--global-batch", "4",
      "--name", "local; it's \"fine\"", "--remote-root", root.string(), "--meshtrain", meshtrain(),
      "--master-port", std::to_string(31000 + ::getpid() % 900), "--db", db.string()};
  const std::string cmd = shell_join(argv) + " > " + shell_quote((tmp / "out").string()) + " 2> " +
                          shell_quote((tmp / "err").string());
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0) << test::read_text(tmp / "err");

  auto store = store::RunStore::open(db);
  ASSERT_TRUE(store.ok());
  auto runs = (*store)->list_runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  const auto& run = runs->front();
  EXPECT_EQ(run.status, "ok") << run.exit_reason;
  EXPECT_EQ(run.name, "local; it's \"fine\"");
  EXPECT_EQ(run.world, 2);
  auto info = (*store)->get_run(run.id);
  ASSERT_TRUE(info.ok());
  auto rec = launch_record_from_json(info->cluster.at("launch"));
  ASSERT_TRUE(rec.ok());
  ASSERT_EQ(rec->nodes.size(), 1u);
  EXPECT_EQ(rec->nodes[0].host, "local");
  EXPECT_EQ(fs::status(rec->nodes[0].run_dir).permissions() & fs::perms::all, fs::perms::owner_all);

  // Every step value of both ranks' files is in the store once; offsets = the files' sizes.
  auto sources = (*store)->sources(run.id);
  ASSERT_TRUE(sources.ok());
  std::map<std::string, uint64_t> offsets;
  for (const auto& s : *sources) offsets[s.name] = s.offset;
  std::map<std::tuple<int, int64_t, std::string>, double> files;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string text = test::read_text(fs::path(rec->nodes[0].run_dir) / metrics_file(rank));
    EXPECT_EQ(offsets[metrics_source(0, rank)], text.size()) << "rank " << rank;
    std::istringstream in(text);
    std::string line;
    int step_lines = 0;
    while (std::getline(in, line)) {
      auto r = parse_metrics_line(line);
      ASSERT_TRUE(r.ok()) << line;
      if (auto* s = std::get_if<StepRecord>(&*r)) {
        ++step_lines;
        for (const auto& [key, value] : step_series(*s))
          // The store keeps comm_s.pp and comm_s.ep for pipelined and expert-parallel runs only
          // (docs/store.md).
          if ((key != "comm_s.pp" && key != "comm_s.ep") || value != 0) files[{s->rank, s->step, key}] = value;
      }
    }
    EXPECT_EQ(step_lines, steps) << "rank " << rank;
  }
  std::ostringstream csv;
  ASSERT_TRUE((*store)->export_csv(run.id, csv).ok());
  std::istringstream in(csv.str());
  std::string line;
  std::getline(in, line);
  size_t rows = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) c.push_back(cell);
    ASSERT_EQ(c.size(), 7u) << line;
    ++rows;
    auto it = files.find({std::stoi(c[1]), std::stoll(c[2]), c[5]});
    ASSERT_NE(it, files.end()) << line;
    EXPECT_NEAR(std::stod(c[6]), it->second, 1e-9 * std::max(1.0, std::abs(it->second))) << line;
  }
  EXPECT_EQ(rows, files.size());
  for (const fs::path& d : {tmp, root.parent_path(), fs::current_path()})
    for (const char* f : {"pwned", "pwned2"}) EXPECT_FALSE(fs::exists(d / f)) << d / f;
  fs::remove_all(tmp);
}

// Training data the nodes cannot see at the run config's path (here: a path relative to where
// the workbench runs, which no node's run directory has) is uploaded with the run into the run
// directory's data/ (remote/data_placement.h), and meshtrain trains on that copy.
TEST(LocalRun, DataNotOnTheNodeIsUploadedWithTheRun) {
  ASSERT_TRUE(fs::exists(meshtrain())) << meshtrain() << " is not built";
  const fs::path tmp = test::temp_dir("local-data");
  fs::create_directories(tmp / "shards");
  fs::copy_file(fs::path(MESHWORK_SOURCE_DIR) / "resources" / "data" / "kjv.bin", tmp / "shards" / "train_000000.bin");
  const fs::path db = tmp / "runs.db";
  const std::vector<std::string> argv = {
      std::string(MESHWORK_BIN_DIR) + "/meshwork", "launch", "--local", "--nproc-per-node", "1", "--model", "tiny",
      "--steps", "2", "--seq-len", "64", "--global-batch", "2", "--data", "shards", "--remote-root",
      (tmp / "runs").string(), "--meshtrain", meshtrain(), "--master-port", std::to_string(32000 + ::getpid() % 900),
      "--db", db.string()};
  const std::string cmd = "cd " + shell_quote(tmp.string()) + " && " + shell_join(argv) + " > " +
                          shell_quote((tmp / "out").string()) + " 2> " + shell_quote((tmp / "err").string());
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0) << test::read_text(tmp / "err") << test::read_text(tmp / "out");
  auto store = store::RunStore::open(db);
  ASSERT_TRUE(store.ok());
  auto runs = (*store)->list_runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().status, "ok") << runs->front().exit_reason;
  auto info = (*store)->get_run(runs->front().id);
  ASSERT_TRUE(info.ok());
  auto rec = launch_record_from_json(info->cluster.at("launch"));
  ASSERT_TRUE(rec.ok());
  const fs::path run_dir = rec->nodes.at(0).run_dir;
  EXPECT_EQ(test::read_text(run_dir / "data" / "shards" / "train_000000.bin"),
            test::read_text(tmp / "shards" / "train_000000.bin"));
  EXPECT_NE(test::read_text(run_dir / kRunConfigFile).find("\"data\": \"data/shards\""), std::string::npos)
      << test::read_text(run_dir / kRunConfigFile);
  fs::remove_all(tmp);
}

// `meshwork stop` on the local node: the node's shell is /bin/sh (dash here), whose `kill` differs
// from bash's; every process of the run must be gone and the run marked stopped.
TEST(LocalRun, StopEndsEveryLocalProcess) {
  ASSERT_TRUE(fs::exists(meshtrain())) << meshtrain() << " is not built";
  const fs::path tmp = test::temp_dir("local-stop");
  const fs::path db = tmp / "runs.db";
  ASSERT_EQ(meshwork({"launch", "--local", "--nproc-per-node", "2", "--dp-shard", "2", "--model", "tiny", "--steps",
                      "100000", "--seq-len", "64", "--global-batch", "4", "--name", "endless", "--remote-root",
                      (tmp / "runs").string(), "--meshtrain", meshtrain(), "--master-port",
                      std::to_string(32000 + ::getpid() % 900), "--db", db.string(), "--detach"},
                     tmp),
            0)
      << test::read_text(tmp / "err");
  auto store = store::RunStore::open(db);
  ASSERT_TRUE(store.ok());
  auto runs = (*store)->list_runs();
  ASSERT_TRUE(runs.ok() && runs->size() == 1u);
  const store::RunId id = runs->front().id;
  auto rec = launch_record_from_json((*store)->get_run(id)->cluster.at("launch"));
  ASSERT_TRUE(rec.ok());
  const fs::path dir = rec->nodes[0].run_dir;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (test::read_text(dir / metrics_file(1)).find("\"type\":\"step\"") == std::string::npos &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<pid_t> pids;
  for (const char* f : {"supervisor-node0.pid", "node0.pgid", "rank0.pid", "rank1.pid"}) {
    const std::string t = test::read_text(dir / f);
    ASSERT_FALSE(t.empty()) << f;
    pids.push_back(static_cast<pid_t>(std::stol(t)));
  }
  for (pid_t p : pids) EXPECT_TRUE(alive(p)) << p;
  EXPECT_EQ(meshwork({"stop", std::to_string(id), "--db", db.string()}, tmp), 0) << test::read_text(tmp / "err");
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  auto any_alive = [&] { return std::any_of(pids.begin(), pids.end(), alive); };
  while (any_alive() && std::chrono::steady_clock::now() < gone_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(any_alive());
  EXPECT_EQ((*store)->get_run(id)->summary.status, "stopped");
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace meshwork::remote
