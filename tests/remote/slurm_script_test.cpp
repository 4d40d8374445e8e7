// The sbatch script that slurm_batch_script() writes, run by a real bash with stand-ins for
// Slurm's commands (scontrol, srun) and for meshtrain, so the node rank, the master address and
// the refusals are checked without a Slurm controller (the cluster tests run it under the real one).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/shell_quote.h"
#include "remote/slurm_script.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

namespace fs = std::filesystem;

class SlurmScript : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("meshwork-sbatch-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    rec_.nodes = {{"login", 2, dir_.string(), ""}, {"login", 2, dir_.string(), ""}};
    rec_.master_port = 29333;
    opt_.partition = "debug";
    opt_.nodes = 2;
    opt_.nproc_per_node = 2;
    opt_.time = "1:00";
    opt_.sbatch_args = {"--exclusive"};
    // meshtrain stand-in: records its argv and environment.
    write(dir_ / "meshtrain",
          "#!/bin/sh\nprintf '%s\\n' \"$@\" > argv-$NODE_RANK\n"
          "echo \"$MASTER_ADDR $MASTER_PORT $WORLD_SIZE $NNODES $LOCAL_WORLD_SIZE $MESHWORK_GLOO_HOSTNAME\" > env-$NODE_RANK\n"
          "exit ${FAKE_EXIT:-0}\n");
    // srun stand-in: runs the task once per node, as Slurm would, with SLURM_NODEID.
    write(dir_ / "bin" / "srun",
          "#!/bin/sh\nshift 4\nSLURM_NODEID=0 SLURMD_NODENAME=n1 \"$@\"; a=$?\n"
          "SLURM_NODEID=1 SLURMD_NODENAME=n2 \"$@\"; b=$?\n[ $a -eq 0 ] && exit $b; exit $a\n");
    fs::remove(dir_ / "bin" / "scontrol");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
    fs::permissions(p, fs::perms::owner_all);
  }
  // scontrol stand-in: "show hostnames" prints n1 n2; "show node NAME" prints the NodeAddr from
  // `addrs` (NAME=ADDR words), or that the node is unknown.
  void scontrol(const std::string& addrs) {
    write(dir_ / "bin" / "scontrol",
          "#!/bin/sh\nif [ \"$2\" = hostnames ]; then printf 'n1\\nn2\\n'; exit 0; fi\n"
          "for kv in " + addrs + "; do if [ \"${kv%%=*}\" = \"$3\" ]; then "
          "echo \"NodeName=$3 Arch=x86_64\"; echo \"   NodeAddr=${kv#*=} NodeHostName=$3 Version=22.05.8\"; exit 0; fi; done\n"
          "echo \"Node $3 not found\"; exit 1\n");
  }
  int run_batch(const std::string& env = "") {
    write(dir_ / kSlurmScriptFile, slurm_batch_script(rec_, opt_));
    const std::string cmd = "cd " + shell_quote(dir_.string()) + " && PATH=" + shell_quote((dir_ / "bin").string()) +
                            ":$PATH SLURM_JOB_ID=7 SLURM_JOB_NODELIST='n[1-2]' " + env + " bash ./" +
                            kSlurmScriptFile + " > batch.out 2> batch.err";
    return WEXITSTATUS(std::system(cmd.c_str()));
  }
  std::string file(const std::string& name) { return test::read_text(dir_ / name); }

  fs::path dir_;
  LaunchRecord rec_;
  SlurmJobOptions opt_;
};

TEST_F(SlurmScript, SbatchLinesCarryTheOptions) {
  const std::string s = slurm_batch_script(rec_, opt_);
  EXPECT_NE(s.find("#SBATCH --partition=debug\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --nodes=2\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --ntasks-per-node=1\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --time=1:00\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --exclusive\n"), std::string::npos);
  EXPECT_EQ(s.find("--gpus-per-node"), std::string::npos);  // none asked
  opt_.gpus_per_node = 8;
  opt_.account = "proj1";
  opt_.qos = "high";
  const std::string g = slurm_batch_script(rec_, opt_);
  EXPECT_NE(g.find("#SBATCH --gpus-per-node=8\n"), std::string::npos);
  EXPECT_NE(g.find("#SBATCH --account=proj1\n"), std::string::npos);
  EXPECT_NE(g.find("#SBATCH --qos=high\n"), std::string::npos);
}

TEST_F(SlurmScript, EveryNodeRunsMeshtrainWithSlurmsNodeRankAndTheFirstNodesAddress) {
  scontrol("n1=10.9.0.11 n2=10.9.0.12");
  ASSERT_EQ(run_batch(), 0) << file("batch.err") << file("node0.err") << file("node1.err");
  for (int i = 0; i < 2; ++i) {
    const std::string argv = file("argv-" + std::to_string(i));
    EXPECT_NE(argv.find("--config\nrun_config.json\n"), std::string::npos) << argv;
    EXPECT_NE(argv.find("--node-rank\n" + std::to_string(i) + "\n"), std::string::npos) << argv;
    EXPECT_NE(argv.find("--master-addr\n10.9.0.11\n"), std::string::npos) << argv;
    EXPECT_NE(argv.find("--master-port\n29333\n"), std::string::npos) << argv;
    EXPECT_NE(argv.find("--nnodes\n2\n--node-rank"), std::string::npos) << argv;
    EXPECT_NE(argv.find("--nproc-per-node\n2\n"), std::string::npos) << argv;
    EXPECT_EQ(std::stoi(file("node" + std::to_string(i) + ".exit")), 0);
  }
  EXPECT_EQ(file("env-0"), "10.9.0.11 29333 4 2 2 10.9.0.11\n");
  EXPECT_EQ(file("env-1"), "10.9.0.11 29333 4 2 2 10.9.0.12\n");  // Gloo binds to its own NodeAddr
  EXPECT_NE(file("batch.out").find("master 10.9.0.11:29333 (n1)"), std::string::npos);
}

TEST_F(SlurmScript, NoNodeAddrForTheFirstNodeRefusesLoudlyNeverLocalhost) {
  scontrol("n2=10.9.0.12");
  EXPECT_EQ(run_batch(), 1);
  EXPECT_NE(file("batch.err").find("no NodeAddr for the job's first node 'n1'"), std::string::npos) << file("batch.err");
  EXPECT_FALSE(fs::exists(dir_ / "argv-0"));
  EXPECT_FALSE(fs::exists(dir_ / "argv-1"));
}

TEST_F(SlurmScript, AFailingTrainerIsRecordedAndFailsTheJob) {
  scontrol("n1=10.9.0.11 n2=10.9.0.12");
  EXPECT_EQ(run_batch("FAKE_EXIT=3"), 3);
  EXPECT_EQ(std::stoi(file("node0.exit")), 3);
}

TEST_F(SlurmScript, RestartsResumeOnTheNextPort) {
  scontrol("n1=10.9.0.11 n2=10.9.0.12");
  rec_.max_restarts = 1;
  // Fails on the first attempt only.
  write(dir_ / "meshtrain",
        "#!/bin/sh\nf=tries-$NODE_RANK; n=$(cat $f 2>/dev/null || echo 0); n=$((n+1)); echo $n > $f\n"
        "printf '%s\\n' \"$@\" > argv-$NODE_RANK-$n\n[ $n -ge 2 ]\n");
  EXPECT_EQ(run_batch(), 0) << file("batch.err");
  const std::string second = file("argv-0-2");
  EXPECT_NE(second.find("--resume\n--master-port\n29334\n"), std::string::npos) << second;
  EXPECT_NE(file("node0.restarts").find("1 1 "), std::string::npos);
}

// A requeued job (SLURM_RESTART_COUNT > 0) resumes from the newest checkpoint from its first
// attempt on; a first submission does not ask to resume.
TEST_F(SlurmScript, ARequeuedJobResumesFromTheNewestCheckpoint) {
  scontrol("n1=10.9.0.11 n2=10.9.0.12");
  ASSERT_EQ(run_batch(), 0) << file("batch.err");
  EXPECT_EQ(file("argv-0").find("--resume"), std::string::npos) << file("argv-0");
  ASSERT_EQ(run_batch("SLURM_RESTART_COUNT=1"), 0) << file("batch.err");
  for (const char* argv : {"argv-0", "argv-1"})
    EXPECT_NE(file(argv).find("--master-port\n29333\n--run-dir\n.\n--resume\n"), std::string::npos) << file(argv);
}

TEST(SlurmOptions, OneWordValuesOnly) {
  SlurmJobOptions o;
  o.partition = "gpu h100";
  EXPECT_FALSE(check_slurm_options(o).ok());
  EXPECT_EQ(check_slurm_options(o).error().field, "--partition");
  o.partition = "h100";
  o.sbatch_args = {"--mem=0", "--exclusive"};
  EXPECT_TRUE(check_slurm_options(o).ok());
  o.sbatch_args = {"--comment=$(touch x)"};
  EXPECT_FALSE(check_slurm_options(o).ok());
  o.sbatch_args = {"exclusive"};
  EXPECT_FALSE(check_slurm_options(o).ok());
  o.sbatch_args = {};
  o.nodes = 0;
  EXPECT_FALSE(check_slurm_options(o).ok());
}

}  // namespace
}  // namespace meshwork::remote
