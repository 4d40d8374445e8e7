// The cluster source of a run config (core/cluster_source.h): SSH nodes or a Slurm partition,
// carried in "cluster.source", read back exactly, refused with the field named, and read from a
// stored run that predates it.
#include <gtest/gtest.h>

#include "core/cluster_source.h"
#include "core/run_config.h"

using namespace meshwork;

namespace {

SlurmPartitionSource gpu_partition() {
  SlurmPartitionSource s;
  s.login = "alice@login1:2222";
  s.partition = "gpu";
  s.nodes = 4;
  s.ranks_per_node = 8;
  s.gpus_per_node = 8;
  s.gpu_type = "h100";
  s.gpu_memory_bytes = 80.0 * (1ull << 30);
  return s;
}

}  // namespace

TEST(ClusterSource, ASlurmPartitionRoundTripsThroughTheRunConfig) {
  RunConfig c;
  c.source = gpu_partition();
  for (int i = 0; i < 4; ++i) c.nodes.push_back(NodeConfig{slurm_node_name(gpu_partition(), i), 8, {}});
  const nlohmann::json j = to_json(c);
  EXPECT_EQ(j["cluster"]["source"]["kind"], "slurm");
  EXPECT_EQ(j["cluster"]["source"]["partition"], "gpu");
  auto back = run_config_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_TRUE(is_slurm(back->source));
  EXPECT_EQ(*slurm_source(back->source), gpu_partition());
  EXPECT_EQ(back->nodes.size(), 4u);
  EXPECT_EQ(back->nodes[3].host, "gpu node 3");
  EXPECT_EQ(back->world_size(), 32);
}

TEST(ClusterSource, AnUnknownGpuMemoryStaysUnknown) {
  SlurmPartitionSource s = gpu_partition();
  s.gpu_memory_bytes = 0;
  s.partition.clear();
  const nlohmann::json j = to_json(ClusterSource(s));
  EXPECT_FALSE(j.contains("gpu_memory_bytes"));
  auto back = cluster_source_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(slurm_source(*back)->gpu_memory_bytes, 0);
  EXPECT_EQ(slurm_node_name(s, 0), "default partition node 0");
}

TEST(ClusterSource, SshConfigsAreWrittenAsBeforeAndOldFilesReadAsSshNodes) {
  RunConfig c;
  c.nodes = {{"local", 2, nlohmann::json::object()}};
  const nlohmann::json j = to_json(c);
  EXPECT_FALSE(j["cluster"].contains("source"));
  auto old = run_config_from_json(nlohmann::json::parse(R"({"cluster":{"nodes":[{"host":"n1","slots":2}]}})"));
  ASSERT_TRUE(old.ok()) << old.error().message();
  EXPECT_FALSE(is_slurm(old->source));
  EXPECT_EQ(old->nodes.front().host, "n1");
  auto ssh = run_config_from_json(nlohmann::json::parse(R"({"cluster":{"source":{"kind":"ssh"}}})"));
  ASSERT_TRUE(ssh.ok()) << ssh.error().message();
  EXPECT_FALSE(is_slurm(ssh->source));
}

TEST(ClusterSource, ErrorsNameTheFieldTheValueAndWhatIsAllowed) {
  struct Case {
    const char* json;
    const char* field;
    const char* value;
  };
  const Case cases[] = {
      {R"({"cluster":{"source":"slurm"}})", "cluster.source", "\"slurm\""},
      {R"({"cluster":{"source":{}}})", "cluster.source.kind", ""},
      {R"({"cluster":{"source":{"kind":"k8s"}}})", "cluster.source.kind", "k8s"},
      {R"({"cluster":{"source":{"kind":"slurm","nodes":0}}})", "cluster.source.nodes", "0"},
      {R"({"cluster":{"source":{"kind":"slurm","ranks_per_node":"8"}}})", "cluster.source.ranks_per_node", "\"8\""},
      {R"({"cluster":{"source":{"kind":"slurm","gpus_per_node":-1}}})", "cluster.source.gpus_per_node", "-1"},
      {R"({"cluster":{"source":{"kind":"slurm","partition":7}}})", "cluster.source.partition", "7"},
      {R"({"cluster":{"source":{"kind":"slurm","gpu_memory_bytes":-5}}})", "cluster.source.gpu_memory_bytes", "-5"},
  };
  for (const Case& c : cases) {
    auto r = run_config_from_json(nlohmann::json::parse(c.json));
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.error().field, c.field) << c.json;
    EXPECT_EQ(r.error().value, c.value) << c.json;
    EXPECT_FALSE(r.error().allowed.empty()) << c.json;
  }
}

TEST(ClusterSource, AStoredRunSaysItsSourceAndOneStoredBeforeItByItsSlurmRecord) {
  RunConfig c;
  c.source = gpu_partition();
  EXPECT_EQ(stored_cluster_source(to_json(c), nlohmann::json::object()), ClusterSource(gpu_partition()));
  // Stored before the run config carried its source: the Slurm part of the cluster record.
  const nlohmann::json record = nlohmann::json::parse(R"({"launch":{}, "slurm":{"job_id":"12","login":"node0",
      "options":{"partition":"debug","nodes":2,"nproc_per_node":2,"gpus_per_node":0}}})");
  const ClusterSource old = stored_cluster_source(to_json(RunConfig{}), record);
  ASSERT_TRUE(is_slurm(old));
  EXPECT_EQ(slurm_source(old)->login, "node0");
  EXPECT_EQ(slurm_source(old)->partition, "debug");
  EXPECT_EQ(slurm_source(old)->nodes, 2);
  EXPECT_EQ(slurm_source(old)->ranks_per_node, 2);
  EXPECT_EQ(slurm_source(old)->gpu_memory_bytes, 0);
  EXPECT_FALSE(is_slurm(stored_cluster_source(to_json(RunConfig{}), nlohmann::json{{"launch", nlohmann::json::object()}})));
}
