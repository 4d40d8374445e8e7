// Slurm's outputs on recordings from the real daemons (tests/data/slurm/, Slurm 22.05.8 of the
// test cluster) and on a 24.11-style squeue JSON and a GPU cluster's sinfo written from Slurm's
// documented formats (see tests/data/slurm/SOURCES.md).
#include <gtest/gtest.h>

#include <map>

#include "remote/slurm_parsers.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

std::string slurm_data(const std::string& name) {
  return test::read_text(std::filesystem::path(MESHWORK_TEST_DATA_DIR) / "slurm" / name);
}

TEST(SlurmGres, EveryFormOfGpuGres) {
  EXPECT_EQ(parse_gres_gpus("gpu:8").count, 8);
  EXPECT_EQ(parse_gres_gpus("gpu:8").type, "");
  EXPECT_EQ(parse_gres_gpus("gpu:h100:8").count, 8);
  EXPECT_EQ(parse_gres_gpus("gpu:h100:8").type, "h100");
  EXPECT_EQ(parse_gres_gpus("gpu:a100:4(S:0-1)").count, 4);
  EXPECT_EQ(parse_gres_gpus("gpu:a100:4(S:0-1)").type, "a100");
  EXPECT_EQ(parse_gres_gpus("gpu:a100:2(S:0,1),gpu:v100:2(S:1)").count, 4);
  EXPECT_EQ(parse_gres_gpus("gpu:a100:2(S:0,1),gpu:v100:2(S:1)").type, "a100+v100");
  EXPECT_EQ(parse_gres_gpus("nic:2,gpu:h100:4").count, 4);
  EXPECT_EQ(parse_gres_gpus("gres/gpu:8").count, 8);
  EXPECT_EQ(parse_gres_gpus("(null)").count, 0);
  EXPECT_EQ(parse_gres_gpus("").count, 0);
  EXPECT_EQ(parse_gres_gpus("mps:100").count, 0);
}

TEST(SlurmSinfo, RecordedTestClusterPartitions) {
  auto parts = parse_sinfo(slurm_data("sinfo-22.05.txt"));
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  ASSERT_EQ(parts->size(), 2u);
  const SlurmPartition& debug = (*parts)[0];
  EXPECT_EQ(debug.name, "debug");
  EXPECT_TRUE(debug.is_default);
  EXPECT_TRUE(debug.up);
  EXPECT_EQ(debug.nodes, 2);
  EXPECT_EQ(debug.time_limit, "10:00");
  EXPECT_EQ(debug.cpus_per_node, 2);
  EXPECT_EQ(debug.memory_mb_per_node, 1000);
  EXPECT_EQ(debug.gpus_per_node.count, 0);
  EXPECT_EQ(debug.node_list, "n2,n1");
  EXPECT_EQ(debug.node_states.at("mix"), 1);
  EXPECT_EQ(debug.node_states.at("alloc"), 1);
  EXPECT_EQ((*parts)[1].name, "tiny");
  EXPECT_FALSE((*parts)[1].is_default);
  EXPECT_EQ((*parts)[1].nodes, 1);
}

TEST(SlurmSinfo, GpuClusterSumsStatesPerPartition) {
  auto parts = parse_sinfo(slurm_data("sinfo-gpu-cluster.txt"));
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  ASSERT_EQ(parts->size(), 4u);
  const SlurmPartition& h100 = (*parts)[0];
  EXPECT_EQ(h100.name, "h100");
  EXPECT_TRUE(h100.is_default);
  EXPECT_EQ(h100.nodes, 34);
  EXPECT_EQ(h100.idle_nodes(), 20);
  EXPECT_EQ(h100.node_states.at("mix"), 12);
  EXPECT_EQ(h100.node_states.at("drain*"), 2);
  EXPECT_EQ(h100.gpus_per_node.count, 8);
  EXPECT_EQ(h100.gpus_per_node.type, "h100");
  EXPECT_EQ(h100.time_limit, "2-00:00:00");
  EXPECT_EQ((*parts)[1].gpus_per_node.count, 4);
  EXPECT_EQ((*parts)[1].gpus_per_node.type, "a100");
  EXPECT_EQ((*parts)[2].gpus_per_node.count, 8);
  EXPECT_FALSE((*parts)[3].up);
  EXPECT_EQ((*parts)[3].idle_nodes(), 100);  // "idle~": powered down but idle
}

TEST(SlurmSinfo, NotSinfoIsAnError) {
  auto parts = parse_sinfo("sinfo: error: slurm_load_partitions: Unable to contact slurm controller\n");
  ASSERT_FALSE(parts.ok());
  EXPECT_NE(parts.error().message().find("9 '|' separated fields"), std::string::npos);
}

// Garbled numbers (a fuzzer find: a CPU count of 5e11 was undefined to convert to int) are
// clamped to 2^24, and sums of many lines saturate there instead of wrapping.
TEST(SlurmSinfo, HugeNumbersAreClampedNeverWrapped) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "big|up|infinite|9999999999|idle|500002000000|1e400|gpu:h100:99999999999|n[1-2]\n";
  auto parts = parse_sinfo(text);
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  ASSERT_EQ(parts->size(), 1u);
  const SlurmPartition& p = (*parts)[0];
  EXPECT_EQ(p.nodes, 1 << 24);
  EXPECT_EQ(p.idle_nodes(), 1 << 24);
  EXPECT_EQ(p.cpus_per_node, 1 << 24);
  EXPECT_EQ(p.gpus_per_node.count, 1 << 24);
  EXPECT_GE(p.memory_mb_per_node, 0);
}

TEST(SlurmScontrol, RecordedJobsOfEveryState) {
  auto jobs = parse_scontrol_jobs(slurm_data("scontrol-show-job-22.05.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.error().message();
  ASSERT_GE(jobs->size(), 7u);
  std::map<std::string, SlurmJob> by_id;
  for (const auto& j : *jobs) by_id[j.id] = j;
  EXPECT_EQ(by_id["1"].state, "RUNNING");
  EXPECT_TRUE(by_id["1"].active());
  EXPECT_EQ(by_id["1"].node_list, "n[1-2]");
  EXPECT_EQ(by_id["1"].partition, "debug");
  EXPECT_EQ(by_id["3"].state, "PENDING");
  EXPECT_EQ(by_id["3"].reason, "BeginTime");
  EXPECT_EQ(by_id["4"].state, "FAILED");
  EXPECT_FALSE(by_id["4"].active());
  EXPECT_EQ(by_id["4"].exit_code, "3:0");
  EXPECT_EQ(by_id["5"].state, "CANCELLED");
  EXPECT_EQ(by_id["6"].state, "COMPLETED");
  EXPECT_EQ(by_id["6"].reason, "");  // "None"
  EXPECT_EQ(by_id["7"].reason, "PartitionConfig");
  EXPECT_EQ(by_id["7"].std_out, "/tmp/slurmt/c/job/slurm-7.out");  // scontrol expands %j
}

TEST(SlurmScontrol, TimeoutJob) {
  auto jobs = parse_scontrol_jobs(slurm_data("scontrol-show-job-timeout-22.05.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().state, "TIMEOUT");
  EXPECT_EQ(jobs->front().reason, "TimeLimit");
  EXPECT_EQ(jobs->front().time_limit, "00:01:00");
  EXPECT_FALSE(jobs->front().active());
}

TEST(SlurmScontrol, OneLineFormAndUnknownKeys) {
  auto jobs = parse_scontrol_jobs(
      "JobId=9 JobName=x y JobState=RUNNING Reason=None FutureKey=whatever NodeList=gpu[01-02] ExitCode=0:0\n"
      "JobId=10 JobName=z JobState=PENDING Reason=Resources\n");
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].name, "x y");
  EXPECT_EQ((*jobs)[0].node_list, "gpu[01-02]");
  EXPECT_EQ((*jobs)[1].reason, "Resources");
  EXPECT_FALSE(parse_scontrol_jobs("slurm_load_jobs error: Invalid job id specified").ok());
}

TEST(SlurmScontrol, NodeAddrFromRecordedNode) {
  auto addr = parse_node_addr(slurm_data("scontrol-show-node-22.05.txt"));
  ASSERT_TRUE(addr.ok()) << addr.error().message();
  EXPECT_EQ(*addr, "10.131.0.11");  // the first record (n1); NodeHostName is not an address
  EXPECT_FALSE(parse_node_addr("Node n9 not found").ok());
}

TEST(SlurmScontrol, NodeStatesFromRecordedNodesAndTheOneLineForm) {
  const auto nodes = parse_scontrol_nodes(slurm_data("scontrol-show-node-22.05.txt"));
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "n1");
  EXPECT_EQ(nodes[0].state, "ALLOCATED");
  EXPECT_EQ(nodes[1].name, "n2");
  EXPECT_EQ(nodes[1].state, "MIXED");
  EXPECT_FALSE(nodes[0].lost());
  EXPECT_FALSE(nodes[1].lost());
  // `scontrol -o show node`: one line a node; a node whose slurmd stopped answering.
  const auto down = parse_scontrol_nodes(
      "NodeName=n1 Arch=x86_64 CoresPerSocket=1 State=IDLE ThreadsPerCore=1 Partitions=debug,tiny\n"
      "NodeName=n2 Arch=x86_64 CoresPerSocket=1 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 Partitions=debug "
      "Reason=Not responding [slurm@2026-12-06T23:00:00]\n");
  ASSERT_EQ(down.size(), 2u);
  EXPECT_FALSE(down[0].lost());
  EXPECT_TRUE(down[1].lost());
  EXPECT_EQ(down[1].reason, "Not responding [slurm@2026-12-06T23:00:00]");
  for (const char* state : {"IDLE+DRAIN", "MIXED+NOT_RESPONDING", "FAIL", "idle*"})
    EXPECT_TRUE((SlurmNodeState{"n", state, ""}.lost())) << state;
  EXPECT_TRUE(parse_scontrol_nodes("Node n9 not found").empty());
}

TEST(SlurmSqueueJson, Recorded2205StringStates) {
  auto jobs = parse_squeue_json(slurm_data("squeue-22.05.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 7u);
  EXPECT_EQ((*jobs)[0].id, "1");
  EXPECT_EQ((*jobs)[0].state, "RUNNING");
  EXPECT_EQ((*jobs)[0].time_limit, "00:02:00");
  EXPECT_EQ((*jobs)[2].state, "PENDING");
  EXPECT_EQ((*jobs)[2].reason, "BeginTime");
  EXPECT_EQ((*jobs)[3].state, "FAILED");
  EXPECT_EQ((*jobs)[3].exit_code, "3:0");
}

TEST(SlurmSqueueJson, Style2411ListsAndNumberObjects) {
  auto jobs = parse_squeue_json(slurm_data("squeue-24.11.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].id, "4242");
  EXPECT_EQ((*jobs)[0].state, "RUNNING");
  EXPECT_EQ((*jobs)[0].time_limit, "02:00:00");
  EXPECT_EQ((*jobs)[0].exit_code, "0:0");
  EXPECT_EQ((*jobs)[0].std_out, "/shared/runs/run-1/slurm-%j.out");  // the raw pattern
  EXPECT_EQ((*jobs)[1].state, "PENDING");
  EXPECT_EQ((*jobs)[1].reason, "Resources");
  EXPECT_EQ((*jobs)[1].time_limit, "UNLIMITED");
  EXPECT_EQ((*jobs)[1].restarts, 1);
  EXPECT_EQ((*jobs)[2].state, "TIMEOUT");
  EXPECT_EQ((*jobs)[2].exit_code, "0:15");
}

TEST(SlurmSqueueJson, NotJsonOrNoJobsIsAnErrorUnknownShapesAreSkipped) {
  EXPECT_FALSE(parse_squeue_json("squeue: error: ...").ok());
  EXPECT_FALSE(parse_squeue_json("{\"meta\": {}}").ok());
  auto jobs = parse_squeue_json(R"({"jobs": [42, {"job_id": {"set": true, "number": 5}, "job_state": {"odd": 1}}]})");
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().id, "5");
  EXPECT_EQ(jobs->front().state, "");
  EXPECT_TRUE(jobs->front().active());  // unknown: it may still run
}

TEST(SlurmSacct, EveryStateInTheDocumentedParsableForm) {
  auto jobs = parse_sacct(slurm_data("sacct-documented.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 12u);
  std::map<std::string, SlurmJob> last;  // the newest record of each id (a requeued job's last)
  for (const SlurmJob& j : *jobs) last[j.id] = j;
  EXPECT_EQ(last["101"].state, "COMPLETED");
  EXPECT_EQ(last["101"].exit_code, "0:0");
  EXPECT_EQ(last["101"].reason, "");  // "None"
  EXPECT_EQ(last["102"].state, "FAILED");
  EXPECT_EQ(last["102"].exit_code, "1:0");
  EXPECT_EQ(last["102"].reason, "NonZeroExitCode");
  EXPECT_EQ(last["103"].state, "CANCELLED");  // "CANCELLED by 1000"
  EXPECT_FALSE(last["103"].active());
  EXPECT_EQ(last["104"].state, "TIMEOUT");
  EXPECT_EQ(last["105"].state, "OUT_OF_MEMORY");
  EXPECT_EQ(last["105"].exit_code, "0:125");
  EXPECT_EQ(last["106"].state, "NODE_FAIL");
  EXPECT_EQ(last["107"].state, "PREEMPTED");
  EXPECT_EQ(last["108"].state, "PENDING");
  EXPECT_EQ(last["108"].reason, "BeginTime");
  EXPECT_TRUE(last["108"].active());
  EXPECT_EQ(last["110"].state, "RUNNING");  // after its REQUEUED record
  EXPECT_EQ(last["111"].state, "COMPLETED");  // a field more than asked is ignored
  for (const SlurmJob& j : *jobs) EXPECT_EQ(j.source, "sacct");
}

TEST(SlurmSacct, HeaderAndEmptyOutputAreFineGarbageIsAnError) {
  auto jobs = parse_sacct("JobID|State|ExitCode|Reason\n7|RUNNING|0:0|None\n");
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().id, "7");
  auto none = parse_sacct("\n");  // not in the accounting database (yet)
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = parse_sacct("sacct: error: Problem talking to the database: Connection refused");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("Problem talking to the database"), std::string::npos);
  // A cluster without accounting (the test Slurm, many small clusters) says so; the caller then
  // asks scontrol.
  EXPECT_TRUE(sacct_disabled("Slurm accounting storage is disabled\n"));
  EXPECT_FALSE(sacct_disabled("sacct: error: Problem talking to the database"));
}

TEST(SlurmSbatch, JobIdFromParsable) {
  EXPECT_EQ(*parse_sbatch_job_id("123\n"), "123");
  EXPECT_EQ(*parse_sbatch_job_id("124;cluster-a\n"), "124");
  EXPECT_FALSE(parse_sbatch_job_id("sbatch: error: Batch job submission failed").ok());
}

}  // namespace
}  // namespace meshwork::remote
