// Losing a Slurm node and going on, end to end on the real Slurm of tests/cluster/slurm.sh
// (remote/slurm_elastic.h): a job launched --slurm --elastic on 2 nodes x 2 ranks loses its second
// node (that node's slurmd killed, and the job's processes there, as when the node goes down)
// after a checkpoint; with no user action the job is resubmitted on the node left (sbatch
// --exclude the lost one) at the re-planned shape from the last complete checkpoint, as a second
// segment of the same run, and ends with the loss of the same run uninterrupted; `meshwork
// resume` of the run then names the Slurm nodes of its last job (--dry-run). The stopped
// slurmd is started again after the test (the other Slurm tests share the daemons).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <sstream>

#include "core/shell_quote.h"
#include "core/store/run_segments.h"
#include "core/store/run_store.h"
#include "remote/launch.h"
#include "remote/run_layout.h"
#include "cli_process.h"
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

std::string meshtrain_path() {
  if (const char* env = std::getenv("MESHWORK_TEST_MESHTRAIN"); env && *env) return env;
  return std::string(MESHWORK_BIN_DIR) + "/meshtrain";
}

class SlurmElastic : public ::testing::Test {
 protected:
  static constexpr int kSteps = 16;

  void SetUp() override {
    auto c = test::cluster();
    if (!c) GTEST_SKIP() << "no test cluster (run under ctest: fixtures cluster_up, slurm_up)";
    cluster_ = *c;
    if (!fs::exists(cluster_.dir / "slurm" / "slurm.conf")) GTEST_SKIP() << "no test Slurm (fixture slurm_up)";
    tmp_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    root_ = tmp_ / "shared runs";  // the namespaces share this filesystem, as NFS homes do
    db_ = tmp_ / "runs.db";
  }

  // The slurmd this test stopped runs again, and Slurm has the node back in service.
  void TearDown() override {
    if (stopped_slurmd_.empty()) return;
    const std::string ns = test::read_text(cluster_.dir / (stopped_slurmd_ == "n1" ? "node0" : "node1") / "ns");
    const std::string start = "SLURM_CONF=" + shell_quote((cluster_.dir / "slurm" / "slurm.conf").string()) +
                              " PATH=\"$PATH:/usr/sbin\" nsenter --net=/run/netns/" + std::string(trim_nl(ns)) +
                              " slurmd -N " + stopped_slurmd_ + " </dev/null >/dev/null 2>&1";
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(std::system(start.c_str()), 0) << start;
    // The lost job still COMPLETING on the node (Slurm retries its end there only after a while):
    // down and back in service at once, as an administrator returns a repaired node.
    on_login("scontrol update NodeName=" + stopped_slurmd_ + " State=DOWN Reason=meshwork-test-node-loss");
    on_login("scontrol update NodeName=" + stopped_slurmd_ + " State=RESUME");
    EXPECT_TRUE(wait_for([&] { return on_login("sinfo -h -n " + stopped_slurmd_ + " -o %t") == "idle"; }, 90s))
        << on_login("sinfo -N");
    std::cout << "[ measure ] slurmd " << stopped_slurmd_ << " back in service after "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  }

  static std::string trim_nl(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  std::vector<std::string> launch_args(const std::string& name, std::vector<std::string> more) const {
    std::vector<std::string> a = {"launch", "--slurm", "--login", "node0", "--partition", "debug", "--nodes", "2",
                                  "--nproc-per-node", "2", "--dp-replicate", "2", "--dp-shard", "2", "--model", "tiny",
                                  "--steps", std::to_string(kSteps), "--seq-len", "64", "--global-batch", "4",
                                  "--name", name, "--remote-root", root_.string(), "--meshtrain", meshtrain_path(),
                                  "--master-port", std::to_string(29000 + (::getpid() + name.size()) % 900),
                                  "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                                  (tmp_ / "known_hosts").string(), "--identity", cluster_.identity(),
                                  "--accept-new-host-keys", "--db", db_.string()};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }

  store::RunId run_named(const std::string& name) {
    auto s = store::RunStore::open(db_);
    if (!s) return 0;
    auto runs = (*s)->list_runs();
    if (!runs) return 0;
    for (const auto& r : *runs)
      if (r.name == name) return r.id;
    return 0;
  }

  store::RunInfo run_info(store::RunId id) {
    auto s = store::RunStore::open(db_);
    auto info = (*s)->get_run(id);
    EXPECT_TRUE(info.ok());
    return *info;
  }

  LaunchRecord record(store::RunId id) {
    auto rec = launch_record_from_json(run_info(id).cluster.at("launch"));
    EXPECT_TRUE(rec.ok());
    return *rec;
  }

  int steps_in_file(const LaunchRecord& rec, int rank) {
    const std::string text = test::read_text(fs::path(rec.nodes[0].run_dir) / metrics_file(rank));
    int n = 0;
    for (size_t p = 0; (p = text.find("\"type\":\"step\"", p)) != std::string::npos; ++p) ++n;
    return n;
  }

  // A command on the login node (its stdout and stderr, trailing newlines dropped).
  std::string on_login(const std::string& command) {
    const std::string cmd = "ssh -F " + shell_quote(cluster_.ssh_config()) +
                            " -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR node0 " +
                            shell_quote(command) + " > " + shell_quote((tmp_ / "sq").string()) + " 2>&1";
    std::system(cmd.c_str());
    return trim_nl(test::read_text(tmp_ / "sq"));
  }

  // Job node 1's Slurm node goes down: everything of the job there is frozen first (so that no
  // process is left to write an exit record), its slurmd killed, then the frozen processes.
  void lose_job_node1(const LaunchRecord& rec) {
    const fs::path dir = rec.nodes[0].run_dir;  // every job node's files, on the shared filesystem
    std::istringstream host(test::read_text(dir / node_file(1, ".host")));
    std::string slurm_node;
    host >> slurm_node;
    ASSERT_FALSE(slurm_node.empty());
    std::vector<pid_t> pids;
    for (const char* f : {"node1.pgid", "supervisor-node1.pid", "rank2.pid", "rank3.pid"}) {
      const std::string pid = trim_nl(test::read_text(dir / f));
      if (!pid.empty()) pids.push_back(static_cast<pid_t>(std::stol(pid)));
    }
    ASSERT_EQ(pids.size(), 4u);
    for (pid_t p : pids) ::kill(p, SIGSTOP);
    const std::string slurmd = trim_nl(test::read_text(cluster_.dir / "slurm" / ("slurmd-" + slurm_node + ".pid")));
    ASSERT_FALSE(slurmd.empty());
    ASSERT_EQ(::kill(static_cast<pid_t>(std::stol(slurmd)), SIGKILL), 0);
    stopped_slurmd_ = slurm_node;
    for (pid_t p : pids) ::kill(p, SIGKILL);
  }

  // Rank 0's loss per step, from the store.
  std::map<int64_t, double> rank0_losses(store::RunId id) { return test::stored_losses(db_, id); }

  test::Cluster cluster_;
  fs::path tmp_, root_, db_;
  std::string stopped_slurmd_;
};

TEST_F(SlurmElastic, LostNodeIsResubmittedWithoutItAtANewShapeWithTheUninterruptedLoss) {
  // The reference: the same job, uninterrupted.
  const auto r0 = std::chrono::steady_clock::now();
  Cli ref = run_cli(launch_args("reference", {}), tmp_);
  ASSERT_EQ(ref.code, 0) << ref.err;
  const auto reference = rank0_losses(run_named("reference"));
  ASSERT_EQ(reference.size(), static_cast<size_t>(kSteps));
  std::cout << "[ measure ] reference job "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count() << " s\n";

  const auto t0 = std::chrono::steady_clock::now();
  const pid_t launch = spawn_cli(launch_args("elastic", {"--checkpoint-every", "2", "--elastic"}), tmp_);
  store::RunId id = 0;
  ASSERT_TRUE(wait_for([&] { return (id = run_named("elastic")) != 0; }, 120s)) << test::read_text(tmp_ / "bg.err");
  const LaunchRecord first = record(id);
  const std::string first_job = run_info(id).cluster["slurm"].value("job_id", "");
  // After the checkpoint of step 4 (every rank has logged step 5), before the end.
  ASSERT_TRUE(wait_for([&] { return steps_in_file(first, 3) >= 6; }, 120s)) << test::read_text(tmp_ / "bg.err");
  const int at_loss = steps_in_file(first, 3);
  ASSERT_LT(at_loss, kSteps) << "the run ended before the loss; make it longer";
  lose_job_node1(first);
  const int code = wait_exit(launch);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string err = test::read_text(tmp_ / "bg.err");
  ASSERT_EQ(code, 0) << err;
  EXPECT_NE(err.find("node 1 (debug node 1) lost: on Slurm node " + stopped_slurmd_ +
                     ": its supervisor and ranks were killed"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("), resubmitting at once"), std::string::npos) << err;
  EXPECT_NE(err.find("1 node, not " + stopped_slurmd_), std::string::npos) << err;

  auto s = store::RunStore::open(db_);
  ASSERT_EQ((*s)->list_runs()->size(), 2u);  // the reference and the elastic run: one run, not two
  const store::RunInfo info = run_info(id);
  EXPECT_EQ(info.summary.status, "ok") << info.summary.exit_reason;
  auto segments = store::run_segments(**s, id);
  ASSERT_TRUE(segments.ok());
  ASSERT_EQ(segments->size(), 2u);
  const store::RunSegment& lost = (*segments)[0];
  const store::RunSegment& resumed = (*segments)[1];
  EXPECT_EQ(lost.world, 4);
  EXPECT_EQ(resumed.world, 2);
  EXPECT_EQ(resumed.hosts, (std::vector<std::string>{"debug node 0"}));
  EXPECT_NE(resumed.mesh, lost.mesh);
  EXPECT_NE(resumed.cause.find("node 1 (debug node 1) lost"), std::string::npos) << resumed.cause;
  EXPECT_GE(resumed.from_step, 3);
  EXPECT_LE(resumed.from_step, at_loss + 1);
  EXPECT_EQ((resumed.from_step - 1) % 2, 0);

  // A second Slurm job, on one node, without the lost one; it read the first job's checkpoint.
  const std::string second_job = info.cluster["slurm"].value("job_id", "");
  EXPECT_NE(second_job, first_job);
  const std::string script = info.cluster["slurm"].value("script", "");
  EXPECT_NE(script.find("#SBATCH --nodes=1\n"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --exclude=" + stopped_slurmd_ + "\n"), std::string::npos) << script;
  const LaunchRecord second = record(id);
  EXPECT_EQ(second.segment, 1);
  ASSERT_EQ(second.nodes.size(), 1u);
  EXPECT_NE(second.nodes[0].run_dir, first.nodes[0].run_dir);
  EXPECT_EQ(second.checkpoint_dir, second.nodes[0].run_dir + "/checkpoints");  // its own
  std::istringstream ran_on(test::read_text(fs::path(second.nodes[0].run_dir) / node_file(0, ".host")));
  std::string slurm_node;
  ran_on >> slurm_node;
  EXPECT_FALSE(slurm_node.empty());
  EXPECT_NE(slurm_node, stopped_slurmd_);
  const std::string log = test::read_text(fs::path(second.nodes[0].run_dir) / rank_log_file(0));
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;

  // The same step axis, the uninterrupted job's losses.
  const auto losses = rank0_losses(id);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps));
  for (const auto& [step, loss] : reference) {
    ASSERT_TRUE(losses.count(step)) << "step " << step;
    EXPECT_NEAR(losses.at(step), loss, 1e-4) << "step " << step;
  }
  std::cout << "[ measure ] final loss " << losses.rbegin()->second << " (uninterrupted " << reference.rbegin()->second
            << "); Slurm node " << stopped_slurmd_ << " lost after " << at_loss << " steps, resubmitted at step "
            << resumed.from_step << " at " << resumed.mesh.compact() << " on " << slurm_node << "; elastic run "
            << secs << " s\n";
  // `meshwork resume` of a Slurm run names the Slurm nodes of its last job; --dry-run submits nothing.
  std::vector<std::string> resume = {"resume", std::to_string(id), "--dry-run", "--hosts", "n9",
                                     "--ssh-config", cluster_.ssh_config(), "--known-hosts",
                                     (tmp_ / "known_hosts").string(), "--identity", cluster_.identity(),
                                     "--db", db_.string()};
  Cli unknown = run_cli(resume, tmp_);
  EXPECT_EQ(unknown.code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("a Slurm node of the run's last job: " + slurm_node), std::string::npos) << unknown.err;
  resume[4] = slurm_node;
  Cli dry = run_cli(resume, tmp_);
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("re-planned for 1 node"), std::string::npos) << dry.out;
  EXPECT_EQ(run_info(id).cluster["slurm"].value("job_id", ""), second_job);  // nothing submitted

  const auto from = err.find("elastic: re-planned");
  if (from != std::string::npos)
    std::cout << "[ notice ] " << err.substr(from, err.find("meshwork: info: elastic: segment", from) - from);
}

}  // namespace
}  // namespace meshwork::remote
