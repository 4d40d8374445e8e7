// Step-time estimate against hand calculations.
#include <gtest/gtest.h>

#include "core/time_estimate.h"

using namespace meshwork;

namespace {

ModelSpec preset(const std::string& name) { return *load_model_spec(name); }

// 1 GB/s, 1 GFLOP/s, no latency: seconds equal bytes / 1e9 and FLOPs / 1e9.
HardwareModel unit_hw() {
  HardwareModel hw;
  hw.peak_flops_bf16 = hw.peak_flops_fp32 = 1e9;
  hw.efficiency = 1.0;
  hw.intra_node_bytes_per_s = 1e9;
  hw.inter_node_bytes_per_s = 0.5e9;
  hw.latency_s = 0;
  return hw;
}

TimeQuery query(const ModelSpec& m, MeshShape shape, int64_t seq = 256) {
  TimeQuery q;
  q.model = m;
  q.shape = shape;
  q.gpus_per_node = 8;
  q.training.seq_len = seq;
  q.training.micro_batch = 1;
  q.training.precision = Precision::fp32;
  q.hardware = unit_hw();
  return q;
}

}  // namespace

TEST(TimeEstimate, FlopsPerToken) {
  ModelSpec m = preset("llama-3.1-8b");
  // N = 8,030,261,248 - 128,256 x 4,096 embedding = 7,504,924,672.
  EXPECT_EQ(flop_parameter_count(m), 7'504'924'672);
  // 6N + 12 x 32 layers x 4096 x 8192 = 45,029,548,032 + 12,884,901,888.
  EXPECT_DOUBLE_EQ(model_flops_per_token(m, 8192), 57'914'449'920.0);
  // Tied embeddings count once, as the lm_head matmul.
  EXPECT_EQ(flop_parameter_count(preset("small")), 3'213'568);
}

TEST(TimeEstimate, SingleRankComputeAndMfu) {
  ModelSpec tiny = preset("tiny");
  TimeQuery q = query(tiny, {1, 1, 1, 1});
  q.training.micro_batch = 2;
  q.training.global_batch = 4;  // 2 accumulation steps
  q.hardware.efficiency = 0.4;
  TimeEstimate t = estimate_time(q);
  // 6 x (106,816 - 16,384) + 12 x 2 x 64 x 256 = 542,592 + 393,216 = 935,808 FLOPs per token.
  EXPECT_DOUBLE_EQ(t.model_flops_per_token, 935'808.0);
  EXPECT_EQ(t.grad_accum_steps, 2);
  EXPECT_DOUBLE_EQ(t.tokens_per_step, 4 * 256);
  EXPECT_DOUBLE_EQ(t.compute_s, 1024 * 935'808.0 / (1e9 * 0.4));
  EXPECT_DOUBLE_EQ(t.comm_s, 0);
  EXPECT_DOUBLE_EQ(t.tokens_per_s, 1024 / t.step_s);
  EXPECT_NEAR(t.mfu, 0.4, 1e-12);  // no communication: MFU is the efficiency
}

TEST(TimeEstimate, FullCheckpointingRecomputesForward) {
  ModelSpec tiny = preset("tiny");
  TimeQuery q = query(tiny, {1, 1, 1, 1});
  const double base = estimate_time(q).compute_s;
  q.training.activation_checkpointing = ActivationCheckpointing::full;
  TimeEstimate t = estimate_time(q);
  EXPECT_DOUBLE_EQ(t.compute_s, base * 4.0 / 3.0);
  EXPECT_NEAR(t.mfu, 0.75, 1e-12);  // model FLOPs only: the recompute is not useful work
}

TEST(TimeEstimate, TensorParallelBytes) {
  ModelSpec small = preset("small");
  TimeEstimate t = estimate_time(query(small, {1, 1, 1, 2}));
  // M = 256 tokens x 256 hidden x 4 B = 262,144; ring all-gather over 2 sends M/2 = 131,072.
  // Layers: 4 x 8 x 131,072 = 4,194,304. Root: 4 x 131,072 + 3 all-reduces of 1,024 B
  // (2 x 1/2 x 1,024 each) = 527,360.
  const AxisComm& tp = t.axis(Axis::tp);
  EXPECT_DOUBLE_EQ(tp.bytes, 4'194'304.0 + 527'360.0);
  EXPECT_FALSE(tp.crosses_nodes);
  EXPECT_DOUBLE_EQ(tp.seconds, tp.bytes / 1e9);
  EXPECT_EQ(tp.collectives, 4 * 8 + 7);
  EXPECT_DOUBLE_EQ(t.comm_s, tp.seconds);
}

TEST(TimeEstimate, FsdpBytes) {
  ModelSpec small = preset("small");
  TimeEstimate t = estimate_time(query(small, {1, 4, 1, 1}));
  // P = 3,213,568. Forward and backward all-gathers: 2 x 3/4 x 4P; gradient reduce-scatter
  // 3/4 x 4P: in all 2.25 x 12,854,272 = 28,922,112 bytes.
  EXPECT_DOUBLE_EQ(t.axis(Axis::dp_shard).bytes, 28'922'112.0);
  EXPECT_DOUBLE_EQ(t.axis(Axis::dp_shard).seconds, 28'922'112.0 / 1e9);
  // Two micro-batches a step (global batch 8 over 4 shards of micro batch 1): all-gathers
  // 2 x 2 x 3/4 x 4P; reduce-scatters 2 x 3/4 x 4P (every micro-batch, the default) = 4.5 x 4P,
  // or 3/4 x 4P once per step (--fsdp-grad-sync step) = 3.75 x 4P.
  TimeQuery q = query(small, {1, 4, 1, 1});
  q.training.global_batch = 8;
  EXPECT_DOUBLE_EQ(estimate_time(q).axis(Axis::dp_shard).bytes, 4.5 * 12'854'272.0);
  q.training.fsdp_grad_sync = FsdpGradSync::step;
  EXPECT_DOUBLE_EQ(estimate_time(q).axis(Axis::dp_shard).bytes, 3.75 * 12'854'272.0);
}

TEST(TimeEstimate, ReplicateAllReduceBytes) {
  ModelSpec tiny = preset("tiny");
  TimeEstimate t = estimate_time(query(tiny, {2, 1, 1, 1}));
  // fp32 grads 4 x 106,816 = 427,264 B; ring all-reduce over 2 sends 2 x 1/2 x G = G.
  EXPECT_DOUBLE_EQ(t.axis(Axis::dp_replicate).bytes, 427'264.0);
  // Two replicas, each one sequence: twice the tokens of one rank in the same compute time.
  EXPECT_DOUBLE_EQ(t.tokens_per_step, 2 * 256);
}

TEST(TimeEstimate, ContextParallelRingBytes) {
  ModelSpec small = preset("small");
  TimeEstimate t = estimate_time(query(small, {1, 1, 2, 1}));
  // T = 128 tokens per rank, k/v block = 128 x (4 kv heads x 32) x 4 B = 65,536 B;
  // 4 layers x (cp-1 = 1) x (2 forward + 4 backward) blocks.
  // FSDP runs over dp_shard x cp = 2: with dp_shard 1 all its traffic is charged to cp, as
  // meshtrain's metrics charge it ((size - 1) per axis), the same bytes as FSDP over dp_shard 2.
  const double fsdp = estimate_time(query(small, {1, 2, 1, 1})).axis(Axis::dp_shard).bytes;
  EXPECT_GT(fsdp, 0);
  EXPECT_DOUBLE_EQ(t.axis(Axis::cp).bytes, 4 * 6 * 65'536.0 + fsdp);
  EXPECT_EQ(t.axis(Axis::dp_shard).bytes, 0);
}

TEST(TimeEstimate, CrossNodeGroupsUseTheInterNodeLink) {
  ModelSpec small = preset("small");
  TimeQuery q = query(small, {1, 1, 1, 16});
  q.gpus_per_node = 8;
  TimeEstimate t = estimate_time(q);
  EXPECT_TRUE(t.axis(Axis::tp).crosses_nodes);
  EXPECT_DOUBLE_EQ(t.axis(Axis::tp).seconds, t.axis(Axis::tp).bytes / 0.5e9);
  // dp_replicate 2 x tp 8 on 2 nodes of 8: tp stays inside a node, replicas cross.
  TimeEstimate hs = estimate_time(query(small, {2, 1, 1, 8}));
  EXPECT_FALSE(hs.axis(Axis::tp).crosses_nodes);
  EXPECT_TRUE(hs.axis(Axis::dp_replicate).crosses_nodes);
}

TEST(TimeEstimate, LatencyAndOverlap) {
  ModelSpec tiny = preset("tiny");
  TimeQuery q = query(tiny, {2, 1, 1, 1});
  q.hardware.latency_s = 1e-3;
  TimeEstimate t = estimate_time(q);
  // One bucket, all-reduce over 2 ranks: 2 ring steps of 1 ms.
  EXPECT_DOUBLE_EQ(t.axis(Axis::dp_replicate).seconds, 427'264.0 / 1e9 + 2e-3);
  for (Axis a : kAxes) q.hardware.overlap[a] = 1.0;
  TimeEstimate hidden = estimate_time(q);
  EXPECT_DOUBLE_EQ(hidden.step_s, hidden.compute_s);  // comm (2.4 ms) < compute (240 ms)
  EXPECT_DOUBLE_EQ(hidden.hidden_comm_s, hidden.comm_s);
}

TEST(TimeEstimate, OverlapIsBoundedByCompute) {
  ModelSpec small = preset("small");
  TimeQuery q = query(small, {2, 2, 1, 1});
  q.hardware.latency_s = 0;
  TimeEstimate none = estimate_time(q);
  q.hardware.overlap = AxisArray<double>{};
  q.hardware.overlap[Axis::dp_replicate] = 0.5;
  q.hardware.overlap[Axis::dp_shard] = 1.0;
  TimeEstimate t = estimate_time(q);
  const double shard = t.axis(Axis::dp_shard).seconds;
  const double rep = t.axis(Axis::dp_replicate).seconds;
  // dp_shard hides up to all of compute, dp_replicate up to half, from what is left.
  const double hide_shard = std::min(shard, t.compute_s);
  const double hide_rep = std::min({rep, 0.5 * t.compute_s, t.compute_s - hide_shard});
  EXPECT_DOUBLE_EQ(t.hidden_comm_s, hide_shard + hide_rep);
  EXPECT_DOUBLE_EQ(t.step_s, none.step_s - hide_shard - hide_rep);
  EXPECT_GE(t.step_s, t.compute_s);
}
