// Memory and step time per pipeline stage (core/memory_estimate.h, core/time_estimate.h) against
// the schedule's own counts: the layers and micro-batches each stage holds, the root tensors only
// where their chunk runs, and the bubble from the simulated stage orders.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/memory_estimate.h"
#include "core/param_layout.h"
#include "core/pipeline.h"
#include "core/time_estimate.h"

using namespace meshwork;

namespace {

ModelSpec preset(const std::string& name) { return *load_model_spec(name); }

MemoryQuery memory_query(const ModelSpec& m, MeshShape shape, PipelineSchedule schedule, int64_t micro_batches,
                         int virtual_stages = 1) {
  MemoryQuery q;
  q.model = m;
  q.shape = shape;
  q.training.seq_len = 1024;
  q.training.micro_batch = 1;
  q.training.precision = Precision::fp32;
  q.training.device = DeviceKind::cpu;
  q.training.global_batch = static_cast<int>(micro_batches * shape.group_size(GroupKind::dp));  // micro_batches a step
  q.training.pp_schedule = schedule;
  q.training.pp_virtual_stages = virtual_stages;
  return q;
}

bool has_term(const MemoryBreakdown& b, const std::string& name) {
  for (const auto& t : b.terms)
    if (t.name == name) return true;
  return false;
}

HardwareModel unit_hw() {
  HardwareModel hw;
  hw.peak_flops_bf16 = hw.peak_flops_fp32 = 1e9;
  hw.efficiency = 1.0;
  hw.intra_node_bytes_per_s = 1e9;
  hw.inter_node_bytes_per_s = 0.5e9;
  hw.latency_s = 0;
  return hw;
}

TimeQuery time_query(const ModelSpec& m, MeshShape shape, int64_t global_batch, PipelineSchedule schedule,
                     int virtual_stages = 1) {
  TimeQuery q;
  q.model = m;
  q.shape = shape;
  q.gpus_per_node = 8;
  q.training.seq_len = 1024;
  q.training.micro_batch = 1;
  q.training.global_batch = global_batch;
  q.training.precision = Precision::fp32;
  q.hardware = unit_hw();
  q.training.pp_schedule = schedule;
  q.training.pp_virtual_stages = virtual_stages;
  return q;
}

}  // namespace

TEST(PipelineMemory, EachStageHoldsItsLayersAndItsMicroBatchesInFlight) {
  const ModelSpec m = preset("llama-3.1-8b");  // 32 layers, untied
  const int pp = 4;
  const int64_t micro_batches = 8;
  const auto stages = estimate_memory_stages(memory_query(m, {1, 1, 1, 1, pp}, PipelineSchedule::one_f_one_b, micro_batches));
  ASSERT_EQ(stages.size(), 4u);
  const auto cut = pipeline_cut(m, 1024, pp, 1);
  int64_t layers = 0, owned = 0;
  for (int r = 0; r < pp; ++r) {
    const MemoryBreakdown& b = stages[static_cast<size_t>(r)];
    EXPECT_EQ(b.pp_stage, r);
    EXPECT_EQ(b.stage_layers, cut[static_cast<size_t>(r)].num_layers);
    // 1f1b: min(M, pp - r) micro-batches through the stage's layers.
    EXPECT_EQ(b.held_layers, std::min<int64_t>(micro_batches, pp - r) * b.stage_layers) << "stage " << r;
    // The loss (logits) only where the head is; every stage sends and receives.
    EXPECT_EQ(has_term(b, "loss.logits"), r == pp - 1) << "stage " << r;
    EXPECT_TRUE(has_term(b, "pp.p2p")) << "stage " << r;
    layers += b.stage_layers;
    owned += b.owned_params;
  }
  EXPECT_EQ(layers, 32);
  // The stages' parameters partition the model: the embedding on the first, norm and head on the last.
  EXPECT_EQ(owned, tp_param_layout(m, 1).total_numel());
  EXPECT_EQ(stages[0].owned_params - stages[0].stage_layers * tp_param_layout(m, 1).layer_numel(),
            m.vocab_size * m.hidden_size);
  // The first stage holds the most activations; the worst stage is the largest total.
  EXPECT_GT(stages[0].activations, stages[3].activations);
  const MemoryBreakdown worst = worst_stage_memory(memory_query(m, {1, 1, 1, 1, pp}, PipelineSchedule::one_f_one_b, micro_batches));
  int64_t largest = 0;
  for (const auto& b : stages) largest = std::max(largest, b.total());
  EXPECT_EQ(worst.total(), largest);
}

TEST(PipelineMemory, GpipeHoldsEveryMicroBatchAndOneStageIsTheOldEstimate) {
  const ModelSpec m = preset("llama-3.1-8b");
  const auto gpipe = estimate_memory_stages(memory_query(m, {1, 1, 1, 1, 2}, PipelineSchedule::gpipe, 6));
  for (const auto& b : gpipe) EXPECT_EQ(b.held_layers, 6 * b.stage_layers);
  const auto one_f = estimate_memory_stages(memory_query(m, {1, 1, 1, 1, 2}, PipelineSchedule::one_f_one_b, 6));
  EXPECT_LT(one_f[0].activations, gpipe[0].activations);
  // pp = 1: one stage, the estimate as it always was (one micro-batch of every layer).
  const MemoryQuery flat = memory_query(m, {1, 1, 1, 1}, PipelineSchedule::one_f_one_b, 6);
  const auto one = estimate_memory_stages(flat);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].total(), estimate_memory(flat).total());
  EXPECT_EQ(one[0].held_layers, 32);
  EXPECT_FALSE(has_term(one[0], "pp.p2p"));
}

TEST(PipelineMemory, InterleavedHoldsChunkMicroBatchesOfItsChunks) {
  const ModelSpec m = preset("llama-3.1-8b");
  // pp 2, V 2, M 4: rank 0 runs chunks 0 and 2 and holds 2 (pp - 1) + (V - 1) pp + 1 = 5
  // chunk-micro-batches at its peak (core/pipeline_schedule_test.cpp lists its order).
  const auto stages = estimate_memory_stages(memory_query(m, {1, 1, 1, 1, 2}, PipelineSchedule::interleaved_1f1b, 4, 2));
  const auto cut = pipeline_cut(m, 1024, 2, 2);
  // Its order starts F0@0 F1@0 F0@2 F1@2 F2@0: 3 micro-batches of chunk 0 and 2 of chunk 2 held,
  // and never more than 5 chunk-micro-batches.
  const int64_t c0 = cut[0].num_layers, c2 = cut[2].num_layers;
  EXPECT_GE(stages[0].held_layers, 3 * c0 + 2 * c2);
  EXPECT_LE(stages[0].held_layers, 5 * std::max(c0, c2));
  EXPECT_EQ(stages[0].stage_layers, c0 + c2);
}

TEST(PipelineTime, StagesSplitTheComputeAndTheBubbleIsSimulated) {
  const ModelSpec m = preset("llama-3.1-8b");
  const TimeEstimate one = estimate_time(time_query(m, {1, 1, 1, 1}, 8, PipelineSchedule::one_f_one_b));
  const TimeEstimate four = estimate_time(time_query(m, {1, 1, 1, 1, 4}, 8, PipelineSchedule::one_f_one_b));
  // The slowest stage computes about a quarter of the model (its share of the cost).
  EXPECT_GT(four.compute_s, one.compute_s / 4);
  EXPECT_LT(four.compute_s, one.compute_s / 4 * 1.2);
  // The step is its compute plus what it waits: the bubble, close to (pp - 1) / (M + pp - 1).
  EXPECT_NEAR(four.step_s, four.compute_s + four.comm_s - four.hidden_comm_s, 1e-9 * four.step_s);
  EXPECT_GT(four.comm[Axis::pp].seconds, 0);
  const double closed = pipeline_bubble_fraction(PipelineSchedule::one_f_one_b, 4, 1, 8);
  EXPECT_GT(four.pp_bubble_fraction, closed * 0.9);
  EXPECT_LT(four.pp_bubble_fraction, closed * 1.5);
  // Four stages are faster than one rank, by less than four (the bubble).
  EXPECT_GT(four.tokens_per_s, 2.5 * one.tokens_per_s);
  EXPECT_LT(four.tokens_per_s, 4.0 * one.tokens_per_s);
  EXPECT_EQ(one.comm[Axis::pp].seconds, 0);
  EXPECT_EQ(one.pp_bubble_fraction, 0);
}

TEST(PipelineTime, MoreMicroBatchesAndInterleavingShrinkTheBubble) {
  const ModelSpec m = preset("llama-3.1-8b");
  const TimeEstimate m8 = estimate_time(time_query(m, {1, 1, 1, 1, 4}, 8, PipelineSchedule::one_f_one_b));
  const TimeEstimate m32 = estimate_time(time_query(m, {1, 1, 1, 1, 4}, 32, PipelineSchedule::one_f_one_b));
  EXPECT_LT(m32.pp_bubble_fraction, m8.pp_bubble_fraction);
  const TimeEstimate inter = estimate_time(time_query(m, {1, 1, 1, 1, 4}, 8, PipelineSchedule::interleaved_1f1b, 2));
  EXPECT_LT(inter.pp_bubble_fraction, m8.pp_bubble_fraction);
  const TimeEstimate gpipe = estimate_time(time_query(m, {1, 1, 1, 1, 4}, 8, PipelineSchedule::gpipe));
  EXPECT_NEAR(gpipe.pp_bubble_fraction, m8.pp_bubble_fraction, 0.02);  // same fill and drain
}
