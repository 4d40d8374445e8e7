// The GPU kinds (core/gpu_kinds.h) and a cluster described by them (core/cluster_source.h): the
// table, its hardware model, the run config round trip and its refusals; and the step's exposed
// communication per axis, which sums to the plan's comm share.
#include <gtest/gtest.h>

#include "core/gpu_kinds.h"
#include "core/parallel_layout.h"
#include "core/run_config.h"
#include "core/time_estimate.h"

using namespace meshwork;

TEST(GpuKinds, EveryKindIsFoundByItsIdAndTheH100IsTheGpuDefaults) {
  ASSERT_GE(gpu_kinds().size(), 7u);
  for (const GpuKind& k : gpu_kinds()) {
    auto found = find_gpu_kind(k.id);
    ASSERT_TRUE(found.ok()) << k.id;
    EXPECT_EQ(*found, k);
    EXPECT_GT(k.memory_bytes, 0);
    EXPECT_GT(k.peak_flops_bf16, k.peak_flops_fp32);
    EXPECT_GT(k.intra_node_bytes_per_s, 0);
    EXPECT_GT(k.inter_node_bytes_per_s, 0);
  }
  EXPECT_TRUE(find_gpu_kind("H200").ok());  // case-insensitive
  auto none = find_gpu_kind("h100-pcie-toaster");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "--gpu: h100-pcie-toaster: one of " + gpu_kind_ids());
  // An H100 80 GB is what the GPU estimates assumed all along: `--gpu h100-80gb` plans as
  // `--gpu-memory 80GiB` does.
  const HardwareModel h = hardware_for(*find_gpu_kind("h100-80gb"));
  const HardwareModel d = HardwareModel::h100();
  EXPECT_EQ(h.peak_flops_bf16, d.peak_flops_bf16);
  EXPECT_EQ(h.peak_flops_fp32, d.peak_flops_fp32);
  EXPECT_EQ(h.intra_node_bytes_per_s, d.intra_node_bytes_per_s);
  EXPECT_EQ(h.inter_node_bytes_per_s, d.inter_node_bytes_per_s);
  EXPECT_EQ(h.overlap, d.overlap);
  EXPECT_EQ(find_gpu_kind("h100-80gb")->memory_bytes, 80.0 * (int64_t{1} << 30));
  EXPECT_EQ(hardware_for(*find_gpu_kind("l40s")).intra_node_bytes_per_s, HardwareModel::kPcieIntraNodeBytesPerS);
}

TEST(GpuKinds, ADescribedClusterRoundTripsThroughTheRunConfigAndIsRefusedWithItsField) {
  RunConfig c;
  DescribedClusterSource d = describe_cluster(*find_gpu_kind("b200"), 16, 8, "next year");
  c.source = d;
  for (int i = 0; i < 16; ++i) c.nodes.push_back(NodeConfig{described_node_name(d, i), 8, {}});
  auto back = run_config_from_json(to_json(c));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->source, ClusterSource(d));
  EXPECT_EQ(std::string(cluster_source_kind(back->source)), "described");
  EXPECT_EQ(back->nodes[3].host, "next year node 3");
  EXPECT_EQ(hardware_for(d).peak_flops_bf16, find_gpu_kind("b200")->peak_flops_bf16);

  nlohmann::json j = to_json(ClusterSource(d));
  j["peak_flops_bf16"] = 0;
  auto zero = cluster_source_from_json(j);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message(), "cluster.source.peak_flops_bf16: 0: a number > 0");
  j.erase("peak_flops_bf16");
  EXPECT_EQ(cluster_source_from_json(j).error().message(), "cluster.source.peak_flops_bf16: missing: a number > 0");
  EXPECT_EQ(cluster_source_from_json({{"kind", "imagined"}}).error().message(),
            "cluster.source.kind: imagined: must be \"ssh\", \"slurm\" or \"described\"");
}

TEST(TimeEstimate, ExposedSharesSumToTheStepsExposedCommunication) {
  // FSDP over 8 GPUs on H100s: its all-gathers hide behind compute (overlap 1), so the axis's
  // seconds are large and its exposed share small.
  const ModelSpec model = *load_model_spec("llama-3.1-8b");
  RunConfig c;
  c.model = "llama-3.1-8b";
  c.mesh = MeshShape{2, 4, 1, 2};
  c.training.seq_len = 4096;
  c.training.micro_batch = 1;
  c.training.global_batch = 32;
  c.training.precision = Precision::bf16;
  c.training.device = DeviceKind::cuda;
  Placement p;
  p.world_size = 16;
  p.ranks_per_node = 8;
  const LayoutCheck checked = ParallelLayout::check(c, &model, p);
  ASSERT_TRUE(checked.ok()) << checked.report.first_error().message();
  const TimeEstimate e = estimate_time(checked.layout->time_query(model, HardwareModel::h100()));
  ASSERT_GT(e.hidden_comm_s, 0);
  double sum = 0, hidden = 0;
  for (Axis a : kAxes) {
    sum += e.exposed_share(a);
    hidden += e.comm[a].hidden_s;
    EXPECT_GE(e.exposed_share(a), -1e-12) << axis_name(a);
    EXPECT_LE(e.comm[a].hidden_s, e.comm[a].seconds + 1e-15) << axis_name(a);
  }
  EXPECT_NEAR(hidden, e.hidden_comm_s, 1e-12 * e.step_s);
  EXPECT_NEAR(sum, (e.comm_s - e.hidden_comm_s) / e.step_s, 1e-12);
  EXPECT_LT(e.exposed_share(Axis::dp_shard), e.comm[Axis::dp_shard].seconds / e.step_s);
}
