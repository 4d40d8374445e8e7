// End to end on a real Slurm (tests/cluster/slurm.sh: slurmctld + slurmd n1 in node0's namespace,
// slurmd n2 in node1's), through the login node node0 over SSH, with the real meshtrain, driven
// by the `meshwork` CLI: launch dp_shard 2 x tp 2 on 2 nodes x 2 ranks (every metric in the store
// equals the files), stop (scancel), a killed rank (Slurm's FAILED and the rank named), a time
// limit (TIMEOUT), a bad partition or account (sbatch's refusal, nothing recorded), a queued job
// (its pending reason shown), one meshtrain tail for the whole job, a stopped rank named by
// `meshwork diagnose`.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/calibration.h"
#include "core/exit_record.h"
#include "core/metrics.h"
#include "core/store/calibration_store.h"
#include "core/store/run_observations.h"
#include "core/store/run_store.h"
#include "remote/bundle.h"
#include "remote/launch.h"
#include "remote/run_layout.h"
#include "core/shell_quote.h"
#include "cli_process.h"
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

std::string meshtrain_path() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

class SlurmRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = test::cluster();
    if (!c) GTEST_SKIP() << "no test cluster (run under ctest: fixtures cluster_up, slurm_up)";
    cluster_ = *c;
    if (!fs::exists(cluster_.dir / "slurm" / "slurm.conf")) GTEST_SKIP() << "no test Slurm (fixture slurm_up)";
    tmp_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    root_ = tmp_ / "shared runs";  // the namespaces share this filesystem, as NFS homes do
    db_ = tmp_ / "runs.db";
  }

  std::vector<std::string> common() const {
    return {"--ssh-config", cluster_.ssh_config(), "--known-hosts", (tmp_ / "known_hosts").string(),
            "--identity", cluster_.identity(), "--accept-new-host-keys", "--db", db_.string()};
  }

  void TearDown() override {
    std::error_code ec;  // an unpacked bundle is ~0.5 GB: not left behind
    if (!tmp_.empty()) fs::remove_all(tmp_ / "shared bundles", ec);
  }

  // Sets `flag`'s value in `args` (the flag must be there).
  static void set_flag(std::vector<std::string>& args, const std::string& flag, const std::string& value) {
    auto it = std::find(args.begin(), args.end(), flag);
    ASSERT_NE(it, args.end()) << flag;
    *(it + 1) = value;
  }

  std::vector<std::string> launch_args(int steps, const std::string& name, std::vector<std::string> more = {}) const {
    std::vector<std::string> a = {"launch", "--slurm", "--login", "node0", "--partition", "debug", "--nodes", "2",
                                  "--nproc-per-node", "2", "--dp-shard", "2", "--tp", "2", "--model", "tiny",
                                  "--steps", std::to_string(steps), "--seq-len", "64", "--global-batch", "4",
                                  "--name", name, "--remote-root", root_.string(), "--meshtrain", meshtrain_path(),
                                  "--master-port", std::to_string(29000 + (::getpid() + steps) % 900)};
    a.insert(a.end(), more.begin(), more.end());
    auto c = common();
    a.insert(a.end(), c.begin(), c.end());
    return a;
  }

  store::RunInfo run_info(store::RunId id) {
    auto s = store::RunStore::open(db_);
    EXPECT_TRUE(s.ok());
    auto info = (*s)->get_run(id);
    EXPECT_TRUE(info.ok());
    return *info;
  }

  store::RunId wait_run() {
    store::RunId id = 0;
    wait_for([&] {
      if (!fs::exists(db_)) return false;
      auto s = store::RunStore::open(db_);
      if (!s) return false;
      auto runs = (*s)->list_runs();
      if (!runs || runs->empty()) return false;
      id = runs->front().id;
      return true;
    }, 120s);
    return id;
  }

  LaunchRecord record(store::RunId id) {
    auto rec = launch_record_from_json(run_info(id).cluster.at("launch"));
    EXPECT_TRUE(rec.ok());
    return *rec;
  }

  std::string events(store::RunId id) {
    auto s = store::RunStore::open(db_);
    auto ev = (*s)->events(id);
    std::string out;
    for (const auto& e : *ev) out += e.level + ": " + e.text + "\n";
    return out;
  }

  int steps_in_file(const LaunchRecord& rec, int rank) {
    const std::string text = test::read_text(fs::path(rec.nodes[0].run_dir) / metrics_file(rank));
    int n = 0;
    for (size_t p = 0; (p = text.find("\"type\":\"step\"", p)) != std::string::npos; ++p) ++n;
    return n;
  }

  std::vector<pid_t> rank_pids(const LaunchRecord& rec) {
    std::vector<pid_t> pids;
    for (int r = 0; r < rec.world_size(); ++r) {
      const std::string text = test::read_text(fs::path(rec.nodes[0].run_dir) / ("rank" + std::to_string(r) + ".pid"));
      if (!text.empty()) pids.push_back(static_cast<pid_t>(std::stol(text)));
    }
    return pids;
  }

  // A command on the login node (its stdout and stderr, trailing newlines dropped).
  std::string on_login(const std::string& command) {
    const std::string cmd = "ssh -F " + shell_quote(cluster_.ssh_config()) +
                            " -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR node0 " +
                            shell_quote(command) + " > " + shell_quote((tmp_ / "sq").string()) + " 2>&1";
    std::system(cmd.c_str());
    std::string s = test::read_text(tmp_ / "sq");
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  // squeue's view of the job on the login node: "" when Slurm lists it no more.
  std::string squeue_state(const std::string& job) { return on_login("squeue -h -j " + job + " -o %T"); }

  // A refused launch leaves nothing: no run directory (the content-addressed .deploy may stay)
  // and no run in the store, so nothing shows as running.
  void expect_nothing_recorded() {
    if (fs::exists(root_)) {
      for (const auto& e : fs::directory_iterator(root_))
        EXPECT_NE(e.path().filename().string().rfind("run-", 0), 0u) << e.path();
    }
    if (fs::exists(db_)) {
      auto s = store::RunStore::open(db_);
      ASSERT_TRUE(s.ok());
      EXPECT_TRUE((*s)->list_runs()->empty());
    }
  }

  // Every rank's file equals the store: per source the offset is the size of the complete lines,
  // and every step value of every rank is stored once, equal.
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
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::vector<std::string> c;
      std::stringstream ls(line);
      std::string cell;
      while (std::getline(ls, cell, ',')) c.push_back(cell);
      ASSERT_EQ(c.size(), 7u) << line;
      from_store[std::make_tuple(std::stoi(c[1]), std::stoll(c[2]), c[5])] = std::stod(c[6]);
    }
    ASSERT_FALSE(from_files.empty());
    ASSERT_EQ(from_store.size(), from_files.size());
    for (const auto& [key, value] : from_files) {
      ASSERT_TRUE(from_store.count(key)) << std::get<0>(key) << "/" << std::get<1>(key) << "/" << std::get<2>(key);
      EXPECT_NEAR(from_store[key], value, 1e-9 * std::max(1.0, std::abs(value)));
    }
  }

  test::Cluster cluster_;
  fs::path tmp_, root_, db_;
};

TEST_F(SlurmRun, ProbeListsThePartitionsOfTheLoginNode) {
  std::vector<std::string> args = {"probe", "--slurm", "node0", "--json"};
  auto c = common();
  args.insert(args.end(), c.begin(), c.end() - 2);  // no --db
  Cli r = run_cli(args, tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u) << r.out;
  EXPECT_EQ(j[0]["name"], "debug");
  EXPECT_EQ(j[0]["default"], true);
  EXPECT_EQ(j[0]["nodes"], 2);
  EXPECT_EQ(j[0]["cpus_per_node"], 2);
  EXPECT_EQ(j[0]["gpus_per_node"], 0);
  EXPECT_EQ(j[1]["name"], "tiny");
  EXPECT_EQ(j[1]["nodes"], 1);
  EXPECT_EQ(j[2]["name"], "bare");  // n3, without the torch environment
  EXPECT_EQ(j[2]["nodes"], 1);
}

TEST_F(SlurmRun, DpShard2Tp2OnTwoNodesThroughTheLoginNodeEveryMetricInTheStore) {
  const int steps = 6;
  const auto t0 = std::chrono::steady_clock::now();
  Cli r = run_cli(launch_args(steps, "slurm dp_shard 2 x tp 2"), tmp_);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  store::RunId id = wait_run();
  ASSERT_EQ(r.code, 0) << r.err << (id ? "\n" + run_info(id).summary.exit_reason + "\n" + events(id) : "");
  std::cout << "[ measure ] Slurm launch 2 nodes x 2 ranks, " << steps << " steps: " << secs << " s\n";
  EXPECT_NE(r.out.find("submitted as Slurm job"), std::string::npos) << r.out;
  const store::RunInfo info = run_info(id);
  EXPECT_EQ(info.summary.status, "ok");
  ASSERT_TRUE(info.cluster.contains("slurm"));
  const std::string job = info.cluster["slurm"]["job_id"].get<std::string>();
  EXPECT_FALSE(job.empty());
  const LaunchRecord rec = record(id);
  ASSERT_EQ(rec.nodes.size(), 2u);
  // The script is kept with the run, in the store and in the run directory, byte for byte.
  const std::string script = info.cluster["slurm"]["script"].get<std::string>();
  EXPECT_EQ(test::read_text(fs::path(rec.nodes[0].run_dir) / "job.sbatch"), script);
  EXPECT_NE(script.find("#SBATCH --partition=debug"), std::string::npos);
  // Slurm ran the nodes: node 0 on n1 (node0's namespace), node 1 on n2, and the master was n1's
  // NodeAddr, never localhost.
  const std::string out = test::read_text(fs::path(rec.nodes[0].run_dir) / ("slurm-" + job + ".out"));
  EXPECT_NE(out.find("master " + cluster_.addresses[0] + ":"), std::string::npos) << out;
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(steps_in_file(rec, rank), steps) << "rank " << rank;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string text = test::read_text(fs::path(rec.nodes[0].run_dir) / metrics_file(rank));
    auto first = parse_metrics_line(text.substr(0, text.find('\n')));
    ASSERT_TRUE(first.ok());
    const auto* start = std::get_if<StartRecord>(&*first);
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(start->mesh[Axis::dp_shard], 2);
    EXPECT_EQ(start->mesh[Axis::tp], 2);
  }
  expect_store_equals_files(id, rec);
  const std::string ev = events(id);
  EXPECT_NE(ev.find("Slurm job " + job + ": COMPLETED"), std::string::npos) << ev;
  // The test Slurm keeps no accounting: sacct said so once, and scontrol gave the states.
  EXPECT_NE(ev.find("no accounting on this cluster (sacct: accounting storage is disabled)"), std::string::npos) << ev;
  // Both nodes' ranks came through ONE meshtrain tail on the login node (the shared run
  // directory: one follow stream for the whole job, issue 26), never one per node, never files.
  size_t tails = 0;
  for (size_t p = 0; (p = ev.find("one meshtrain tail streams", p)) != std::string::npos; ++p) ++tails;
  EXPECT_EQ(tails, 1u) << ev;
  EXPECT_NE(ev.find("nodes 0-1 (node0): one meshtrain tail streams 4 rank(s)"), std::string::npos) << ev;
  EXPECT_NE(r.err.find("meshwork: info: nodes 0-1 (node0): one meshtrain tail streams 4 rank(s)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("following its files one by one"), std::string::npos) << r.err;
}

TEST_F(SlurmRun, CalibrateThroughSlurmMeasuresBothNodesAndMatchesTheirRuns) {
  // meshwork calibrate --slurm: meshtrain calibrate as one sbatch job on 2 nodes x 1 rank, the
  // records streamed through the login node and fitted; the fingerprint names the compute nodes
  // by their own host names (not the login node), so runs of the same nodes find it.
  std::vector<std::string> a = {"calibrate", "--slurm", "--login", "node0", "--partition", "debug", "--nodes", "2",
                                "--nproc-per-node", "1", "--model", "tiny", "--seq-len", "64",
                                "--remote-root", root_.string(), "--meshtrain", meshtrain_path(),
                                "--master-port", std::to_string(29000 + (::getpid() + 7) % 900)};
  auto c = common();
  a.insert(a.end(), c.begin(), c.end());
  Cli r = run_cli(a, tmp_);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("submitted as Slurm job"), std::string::npos) << r.out;
  auto s = store::RunStore::open(db_);
  ASSERT_TRUE(s.ok());
  auto all = store::list_calibrations(**s);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  const Calibration& cal = all->front().calibration;
  ASSERT_EQ(cal.fingerprint.nodes.size(), 2u);
  // Each node as it calls itself (the test nodes are namespaces of one machine: one host name),
  // never the login node's SSH alias that every node of the launch record carries.
  for (const auto& n : cal.fingerprint.nodes) {
    EXPECT_NE(n.host, "node0");
    EXPECT_EQ(n.devices, 1);
  }
  EXPECT_NE(r.out.find(cal.fingerprint.id()), std::string::npos) << r.out;
  // Across the two nodes: every collective fitted on the inter-node link.
  for (Collective op : kCollectives) EXPECT_TRUE(cal.collective(LinkKind::inter_node, op, 2)) << to_string(op);
  // The run that measured it is a run of those nodes: the same node set.
  ASSERT_TRUE(all->front().run.has_value());
  const store::RunId run = *all->front().run;
  auto info = (*s)->get_run(run);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "ok");
  auto nodes = store::run_node_set(s->get(), run, *info);
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->node_set_id(), cal.fingerprint.node_set_id());
}

TEST_F(SlurmRun, StopIsScancelAndMarksTheRunStopped) {
  Cli r = run_cli(launch_args(100000, "slurm stopped", {"--detach"}), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  const store::RunId id = wait_run();
  const LaunchRecord rec = record(id);
  const std::string job = run_info(id).cluster["slurm"]["job_id"].get<std::string>();
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 0) >= 1; }, 120s)) << squeue_state(job);
  const auto pids = rank_pids(rec);
  ASSERT_EQ(pids.size(), 4u);
  const auto t0 = std::chrono::steady_clock::now();
  Cli s = run_cli({"stop", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--identity", cluster_.identity(), "--db", db_.string()},
                  tmp_);
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(wait_for([&] { return std::none_of(pids.begin(), pids.end(), [](pid_t p) { return alive(p); }); }, 30s));
  std::cout << "[ measure ] meshwork stop (scancel) -> every rank gone after "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  EXPECT_TRUE(wait_for([&] { const auto st = squeue_state(job); return st.empty() || st == "CANCELLED"; }, 30s));
  EXPECT_EQ(run_info(id).summary.status, "stopped");
  EXPECT_NE(run_info(id).summary.exit_reason.find("scancel " + job), std::string::npos);
  // Attaching afterwards backfills and keeps it stopped.
  Cli a = run_cli({"attach", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--identity", cluster_.identity(), "--db", db_.string()},
                  tmp_);
  EXPECT_EQ(a.code, 3) << a.err;
  EXPECT_EQ(run_info(id).summary.status, "stopped");
  expect_store_equals_files(id, rec);
}

TEST_F(SlurmRun, KilledRankFailsTheRunWithSlurmsStateAndTheRankNamed) {
  const pid_t launch = spawn_cli(launch_args(100000, "slurm killed"), tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0);
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 1; }, 120s)) << test::read_text(tmp_ / "bg.err");
  const auto pids = rank_pids(rec);
  ASSERT_EQ(pids.size(), 4u);
  ASSERT_EQ(::kill(pids[3], SIGKILL), 0);
  EXPECT_TRUE(wait_for([&] { return std::none_of(pids.begin(), pids.end(), [](pid_t p) { return alive(p); }); }, 30s));
  EXPECT_EQ(wait_exit(launch), 3) << test::read_text(tmp_ / "bg.err");
  const store::RunInfo info = run_info(id);
  EXPECT_EQ(info.summary.status, "failed");
  const std::string& why = info.summary.exit_reason;
  EXPECT_NE(why.find("Slurm job " + info.cluster["slurm"]["job_id"].get<std::string>() + ": FAILED"),
            std::string::npos) << why;
  // The root cause is node 1's exit record (the job's nodes share the login node's run
  // directory): the rank, its node, the signal and its last step, in the words the user reads.
  test::expect_rank3_killed_on_node1(rec.nodes[1].run_dir, why, "Slurm node n2", 0);
  EXPECT_NE(test::read_text(tmp_ / "bg.err").find("rank 3"), std::string::npos);
  expect_store_equals_files(id, rec);
}

// A rank of the job stopped with SIGSTOP: the login node's one tail reports it stalled, the
// follower (the launch itself) keeps the report in the store, and `meshwork diagnose --json`
// names it (node, pid, "stopped", phase) with the collective the others wait in; after SIGCONT
// the job goes on and the diagnosis clears.
TEST_F(SlurmRun, StoppedRankIsNamedByDiagnoseThroughTheLoginNodesTail) {
  const pid_t launch = spawn_cli(launch_args(100000, "slurm hang", {"--collective-timeout", "600"}), tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  struct Cleanup {  // whatever a failed assertion skipped: the rank continued, the job cancelled
    std::vector<std::string> stop;
    fs::path tmp;
    pid_t launch;
    pid_t victim = 0;
    ~Cleanup() {
      if (victim > 0) ::kill(victim, SIGCONT);
      run_cli(stop, tmp);
      if (!wait_for([&] { return !alive(launch); }, 60s)) ::kill(launch, SIGKILL);
      wait_exit(launch);
    }
  } cleanup{{"stop", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
             (tmp_ / "known_hosts").string(), "--identity", cluster_.identity(), "--db", db_.string()},
            tmp_, launch};
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 6; }, 180s)) << test::read_text(tmp_ / "bg.err");
  const auto pids = rank_pids(rec);
  ASSERT_EQ(pids.size(), 4u);
  auto diagnose = [&](int* code = nullptr) {
    Cli r = run_cli({"diagnose", std::to_string(id), "--json", "--hang-after", "5", "--db", db_.string()}, tmp_);
    if (code) *code = r.code;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j : nlohmann::json{{"state", "unparsed"}, {"out", r.out}, {"err", r.err}};
  };
  ASSERT_EQ(::kill(pids[3], SIGSTOP), 0);
  cleanup.victim = pids[3];
  int code = -1;
  nlohmann::json d;
  const bool named = wait_for([&] {
    d = diagnose(&code);
    return d["state"] == "hang" && !d["culprits"].empty() && !d["waiting"].empty();
  }, 30s);
  ::kill(pids[3], SIGCONT);
  std::cout << "[ diagnosis ] " << d.value("summary", d.dump()) << "\n";
  ASSERT_TRUE(named) << d.dump(2) << events(id);
  EXPECT_EQ(code, 3);
  EXPECT_TRUE(d["follower"].is_number()) << d.dump(2);  // the launch follows and writes
  ASSERT_EQ(d["culprits"].size(), 1u) << d.dump(2);
  const nlohmann::json& c = d["culprits"][0];
  EXPECT_EQ(c["rank"], 3);
  EXPECT_EQ(c["node"], 1);
  EXPECT_EQ(c["pid"], pids[3]);
  EXPECT_EQ(c["process"], "stopped");
  EXPECT_FALSE(c["phase"].get<std::string>().empty());
  for (const auto& w : d["waiting"]) {
    EXPECT_FALSE(w["op"].get<std::string>().empty());
    EXPECT_TRUE(w["axis"] == "dp_shard" || w["axis"] == "tp" || w["axis"] == "world") << w.dump();
    for (int r : w["ranks"]) EXPECT_NE(r, 3);
  }

  const int before = steps_in_file(rec, 3);
  EXPECT_TRUE(wait_for([&] { return steps_in_file(rec, 3) > before + 1; }, 60s)) << "rank 3 did not go on";
  EXPECT_TRUE(wait_for([&] { return diagnose()["state"] != "hang"; }, 30s)) << diagnose().dump(2);
}

// A rank of the job killed (SIGKILL) while the follower (the launch itself) keeps the store:
// `meshwork diagnose --json` names it gone, with its signal, on its node with its pid, as the
// failed run's one culprit; its peers, stopped by their supervisors once it died, are not.
TEST_F(SlurmRun, KilledRankIsNamedGoneWithItsSignalByDiagnose) {
  const pid_t launch = spawn_cli(launch_args(100000, "slurm exit", {"--collective-timeout", "600"}), tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  const LaunchRecord rec = record(id);
  ASSERT_TRUE(wait_for([&] { return steps_in_file(rec, 3) >= 2; }, 180s)) << test::read_text(tmp_ / "bg.err");
  const auto pids = rank_pids(rec);
  ASSERT_EQ(pids.size(), 4u);
  ASSERT_EQ(::kill(pids[3], SIGKILL), 0);
  EXPECT_EQ(wait_exit(launch), 3) << test::read_text(tmp_ / "bg.err");
  Cli r = run_cli({"diagnose", std::to_string(id), "--json", "--hang-after", "5", "--db", db_.string()}, tmp_);
  const nlohmann::json d = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(d.is_object()) << r.out << r.err;
  std::cout << "[ diagnosis ] " << d.value("summary", d.dump()) << "\n";
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(d["state"], "failed") << d.dump(2);
  ASSERT_EQ(d["culprits"].size(), 1u) << d.dump(2) << events(id);
  const nlohmann::json& c = d["culprits"][0];
  EXPECT_EQ(c["rank"], 3);
  EXPECT_EQ(c["node"], 1);
  EXPECT_EQ(c["pid"], pids[3]);
  EXPECT_EQ(c["process"], "gone");
  const std::string ended = c["ended"];
  EXPECT_NE(ended.find("signal"), std::string::npos) << d.dump(2);
  EXPECT_NE(ended.find("KILL"), std::string::npos) << d.dump(2);
  EXPECT_NE(d["summary"].get<std::string>().find("rank 3 (node1, pid " + std::to_string(pids[3]) + "): gone"),
            std::string::npos)
      << d.dump(2);
}

// Slurm's shortest limit is one minute, and slurmctld checks limits every ~30 s: 60-90 s.
TEST_F(SlurmRun, JobOverItsTimeLimitShowsTimeout) {
  Cli r = run_cli(launch_args(1000000, "slurm timeout", {"--time", "1"}), tmp_);
  EXPECT_EQ(r.code, 3) << r.err;
  const store::RunId id = wait_run();
  const store::RunInfo info = run_info(id);
  EXPECT_EQ(info.summary.status, "failed");
  EXPECT_NE(info.summary.exit_reason.find(": TIMEOUT"), std::string::npos) << info.summary.exit_reason;
  EXPECT_NE(info.summary.exit_reason.find("time limit"), std::string::npos) << info.summary.exit_reason;
  EXPECT_NE(r.err.find("TIMEOUT"), std::string::npos) << r.err;
}

TEST_F(SlurmRun, BadPartitionIsSbatchsRefusalAndNothingIsRecorded) {
  auto args = launch_args(4, "slurm refused");
  auto p = std::find(args.begin(), args.end(), "debug");
  *p = "nope";
  Cli r = run_cli(args, tmp_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("invalid partition specified: nope"), std::string::npos) << r.err;
  // What was asked, and what the cluster has.
  EXPECT_NE(r.err.find("sbatch: refused the job (partition nope)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[partitions on this cluster: debug, tiny, bare]"), std::string::npos) << r.err;
  expect_nothing_recorded();
}

// slurm.sh: partition debug denies account "bogus" and slurmctld checks it at submission
// (EnforcePartLimits=ALL; without slurmdbd an unknown account cannot be refused, see there).
TEST_F(SlurmRun, BadAccountIsSbatchsRefusalAndNothingIsRecorded) {
  Cli r = run_cli(launch_args(4, "slurm bad account", {"--account", "bogus"}), tmp_);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("sbatch: refused the job (partition debug, account bogus)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sbatch: error: Batch job submission failed: Requested partition configuration not available now"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("submitted as Slurm job"), std::string::npos) << r.out;
  expect_nothing_recorded();
  // The account is what was refused: the same partition takes another account.
  const std::string held = on_login("cd /tmp && sbatch --parsable --hold -p debug -A meshwork --wrap true");
  ASSERT_FALSE(held.empty());
  EXPECT_TRUE(std::all_of(held.begin(), held.end(), ::isdigit)) << held;
  on_login("scancel " + held);
}

// A job that cannot start at once (--begin: not before 10 minutes from now) waits PENDING with
// Slurm's reason, which the CLI prints and the store keeps while it waits; stop cancels it.
TEST_F(SlurmRun, QueuedJobShowsItsPendingReasonWhileItWaits) {
  const pid_t launch = spawn_cli(launch_args(4, "slurm queued", {"--sbatch-arg=--begin=now+600"}), tmp_);
  const store::RunId id = wait_run();
  ASSERT_NE(id, 0) << test::read_text(tmp_ / "bg.err");
  const std::string job = run_info(id).cluster["slurm"]["job_id"].get<std::string>();
  const std::string pending = "Slurm job " + job + ": PENDING (BeginTime)";
  EXPECT_TRUE(wait_for([&] {
    return events(id).find(pending) != std::string::npos &&
           test::read_text(tmp_ / "bg.err").find("meshwork: info: " + pending) != std::string::npos;
  }, 120s)) << events(id) << test::read_text(tmp_ / "bg.err");
  EXPECT_EQ(squeue_state(job), "PENDING");
  EXPECT_EQ(on_login("squeue -h -j " + job + " -o %r"), "BeginTime");
  Cli s = run_cli({"stop", std::to_string(id), "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                   (tmp_ / "known_hosts").string(), "--identity", cluster_.identity(), "--db", db_.string()},
                  tmp_);
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(wait_exit(launch), 3) << test::read_text(tmp_ / "bg.err");
  EXPECT_TRUE(wait_for([&] { const auto st = squeue_state(job); return st.empty() || st == "CANCELLED"; }, 30s));
  EXPECT_EQ(run_info(id).summary.status, "stopped");
  // It never ran: no rank wrote a line.
  const LaunchRecord rec = record(id);
  EXPECT_FALSE(fs::exists(fs::path(rec.nodes[0].run_dir) / metrics_file(0)));
}

// n3 (partition "bare", tests/cluster/slurm.sh) is a compute node without the workbench's torch
// environment, checkout or build tree: only a runtime bundle runs meshtrain there. With --bundle
// the bundle goes once through the login node into a bundle root on the shared filesystem, the
// run directory's meshtrain links into it, and the job runs it; a second launch uploads nothing.
TEST_F(SlurmRun, BareNodeRunsTheBundleDeployedOnceThroughTheLoginNode) {
  const std::string bundle_path = std::string(MESHWORK_BUNDLE_DIR) + "/meshtrain-cpu.tar.zst";
  auto bundle = load_bundle(bundle_path);
  if (!bundle) GTEST_SKIP() << "no CPU bundle (scripts/build --target bundle-cpu): " << bundle.error().message();
  // n3 really is bare: its slurmd (and every job it starts) sees no build tree and no torch.
  const std::string n3 = test::read_text(cluster_.dir / "slurm" / "slurmd-n3.pid");
  ASSERT_FALSE(n3.empty());
  const fs::path n3_root = "/proc/" + std::to_string(std::stol(n3)) + "/root";
  EXPECT_FALSE(fs::exists(n3_root / (std::string(MESHWORK_BIN_DIR).substr(1) + "/meshtrain")));
  const std::string venv = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") + "/.cache/meshwork/torch-2.15.0";
  EXPECT_TRUE(fs::is_empty(n3_root / venv.substr(1)));

  const fs::path bundles = tmp_ / "shared bundles";  // on the filesystem n3 shares
  auto args = [&](const std::string& name) {
    auto a = launch_args(4, name, {"--bundle", bundle_path, "--bundle-root", bundles.string()});
    set_flag(a, "--partition", "bare");
    set_flag(a, "--nodes", "1");
    set_flag(a, "--tp", "1");  // 1 node x 2 ranks: dp_shard 2
    return a;
  };
  Cli first = run_cli(args("slurm bundle first"), tmp_);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.err.find("meshwork: bundle node0: done, " + std::to_string(bundle->archive_size) + " bytes"),
            std::string::npos) << first.err;
  const auto progress = test::bundle_progress_lines(first.err, "node0");
  ASSERT_FALSE(progress.empty()) << first.err;
  EXPECT_EQ(progress.back().percent, 100);
  EXPECT_GT(progress.back().rate_mib_s, 0);
  EXPECT_EQ(progress.back().eta_s, 0);

  Cli second = run_cli(args("slurm bundle second"), tmp_);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.err.find("meshwork: bundle node0: skipped, 0 bytes uploaded"), std::string::npos) << second.err;
  EXPECT_EQ(second.err.find("meshwork: bundle node0: uploading"), std::string::npos) << second.err;

  auto s = store::RunStore::open(db_);
  ASSERT_TRUE(s.ok());
  auto runs = (*s)->list_runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  for (const auto& r : *runs) {
    EXPECT_EQ(r.status, "ok") << r.name;
    const store::RunInfo info = run_info(r.id);
    const std::string job = info.cluster["slurm"]["job_id"].get<std::string>();
    EXPECT_EQ(info.cluster["slurm"]["bundle"], bundle->sha256);
    const LaunchRecord rec = record(r.id);
    // The run directory's meshtrain is the bundle's, and the job ran on n3.
    const fs::path dir = rec.nodes[0].run_dir;
    ASSERT_TRUE(fs::is_symlink(dir / "meshtrain"));
    EXPECT_EQ(fs::canonical(dir / "meshtrain"), fs::canonical(bundles / bundle->sha256 / bundle->trainer));
    EXPECT_NE(test::read_text(dir / "node0.host").find("n3"), std::string::npos) << test::read_text(dir / ("slurm-" + job + ".out"));
    for (int rank = 0; rank < 2; ++rank) EXPECT_EQ(steps_in_file(rec, rank), 4) << "rank " << rank;
    expect_store_equals_files(r.id, rec);
  }
}

}  // namespace
}  // namespace meshwork::remote
