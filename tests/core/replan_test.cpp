// Re-planning for the surviving nodes: the run's model, sequence length and global batch are
// kept; the shape is the planner's best for the survivors; when none fits, the error says what
// would.
#include <gtest/gtest.h>

#include "core/replan.h"
#include "core/units.h"

using namespace meshwork;

namespace {

RunConfig two_node_run(const std::string& model, MeshShape mesh, int slots) {
  RunConfig run;
  run.name = "elastic";
  run.model = model;
  run.mesh = mesh;
  run.training.seq_len = 1024;
  run.training.global_batch = 8;
  run.training.micro_batch = 1;
  run.nodes = {NodeConfig{"node-a", slots}, NodeConfig{"node-b", slots}};
  return run;
}

}  // namespace

TEST(Replan, KeepsTheGlobalBatchOnTheSurvivors) {
  ReplanInput in;
  in.run = two_node_run("tiny", MeshShape{1, 4, 1, 1}, 2);
  in.run.training.seq_len = 64;
  in.lost_hosts = {"node-b"};
  in.device_memory_bytes = int64_t{4} << 30;
  in.estimate.hardware = HardwareModel::for_device(DeviceKind::cpu);
  in.run.training.device = DeviceKind::cpu;
  auto r = replan_for_survivors(in);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->run.nodes.size(), 1u);
  EXPECT_EQ(r->run.nodes[0].host, "node-a");
  EXPECT_EQ(r->new_shape.world_size(), 2);
  EXPECT_EQ(r->old_shape, (MeshShape{1, 4, 1, 1}));
  EXPECT_EQ(r->run.mesh, r->new_shape);
  EXPECT_EQ(r->run.training, in.run.training);  // the same batch, steps, lr, seed
  EXPECT_TRUE(r->chosen.fits);
  EXPECT_GE(r->candidates, 1);
  EXPECT_NE(r->reason.find("global batch 8 kept"), std::string::npos) << r->reason;
}

// Llama-3.1-8B at 24 GiB per rank fits 2 nodes x 4 ranks but no shape of one node, with
// activation checkpointing or without: the error names the node that would make it fit.
TEST(Replan, NothingFitsSaysWhatWould) {
  ReplanInput in;
  in.run = two_node_run("llama-3.1-8b", MeshShape{1, 1, 1, 8}, 4);
  in.run.training.precision = Precision::bf16;
  in.run.training.device = DeviceKind::cuda;
  in.lost_hosts = {"node-a"};
  in.device_memory_bytes = int64_t{24} << 30;
  auto whole = in;
  whole.lost_hosts.clear();
  whole.run.nodes.push_back(NodeConfig{"node-c", 4});  // sanity: with three nodes, one lost, it fits
  whole.lost_hosts = {"node-c"};
  ASSERT_TRUE(replan_for_survivors(whole).ok());
  auto r = replan_for_survivors(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::does_not_fit);
  EXPECT_NE(r.error().message().find("needs 1 more node of 4 ranks with 24.0 GiB each"), std::string::npos)
      << r.error().message();
}

TEST(Replan, ActivationCheckpointingNamedWhenItIsWhatFits) {
  ReplanInput in;
  in.run = two_node_run("llama-3.2-1b", MeshShape{1, 2, 1, 1}, 1);
  in.run.training.precision = Precision::bf16;
  in.run.training.device = DeviceKind::cuda;
  in.run.training.seq_len = 8192;
  in.run.training.micro_batch = 4;
  in.lost_hosts = {"node-b"};
  // Find the memory where one rank fits only with checkpointing, from the planner itself.
  PlanQuery q;
  q.model = *load_model_spec("llama-3.2-1b");
  q.training = in.run.training;
  q.fixed = MeshShape{1, 1, 1, 1};
  q.device_memory_bytes = int64_t{1} << 50;
  const int64_t plain = make_plan(q)->shapes.front().memory.total();
  q.training.activation_checkpointing = ActivationCheckpointing::full;
  const int64_t checkpointed = make_plan(q)->shapes.front().memory.total();
  ASSERT_LT(checkpointed, plain);
  in.device_memory_bytes = (plain + checkpointed) / 2;
  auto r = replan_for_survivors(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("activation checkpointing"), std::string::npos) << r.error().message();
}

TEST(Replan, RefusesUnknownHostsAndLosingEveryNode) {
  ReplanInput in;
  in.run = two_node_run("tiny", MeshShape{1, 4, 1, 1}, 2);
  in.device_memory_bytes = int64_t{4} << 30;
  in.lost_hosts = {"node-z"};
  auto unknown = replan_for_survivors(in);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().field, "lost host");
  EXPECT_EQ(unknown.error().value, "node-z");
  EXPECT_NE(unknown.error().allowed.find("node-a, node-b"), std::string::npos);
  in.lost_hosts = {"node-a", "node-b"};
  auto all = replan_for_survivors(in);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.error().kind, ErrorKind::does_not_fit);
}
