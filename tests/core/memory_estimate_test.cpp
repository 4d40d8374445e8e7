// Memory estimate terms against hand calculations (numbers worked out in the comments).
#include <gtest/gtest.h>

#include "core/memory_estimate.h"
#include "core/param_layout.h"

using namespace meshwork;

namespace {

ModelSpec preset(const std::string& name) {
  auto spec = load_model_spec(name);
  EXPECT_TRUE(spec.ok());
  return *spec;
}

int64_t term(const MemoryBreakdown& m, const std::string& name) {
  for (const auto& t : m.terms)
    if (t.name == name) return t.bytes;
  return -1;
}

}  // namespace

TEST(ParamLayout, Tp1IsTheWholeModel) {
  for (const char* name : {"tiny", "small", "llama-3.1-8b", "qwen2.5-7b", "llama-3.2-1b"}) {
    ModelSpec m = preset(name);
    EXPECT_EQ(tp_param_layout(m, 1).total_numel(), m.parameter_count()) << name;
  }
}

TEST(ParamLayout, TensorParallelShards) {
  ModelSpec small = preset("small");
  ParamLayout p = tp_param_layout(small, 2);
  // Per layer: norms 2x256 replicated + (attention 196,608 + MLP 589,824) / 2 = 393,728.
  EXPECT_EQ(p.layer_numel(), 393'728);
  // Root: tied embedding split over the vocabulary 128 x 256, final norm 256.
  EXPECT_EQ(p.root_numel(), 128 * 256 + 256);
  EXPECT_EQ(p.kv_heads_per_rank, 2);
  // FSDP over 2: every dim 0 is even, so exactly half.
  EXPECT_EQ(p.sharded_total_numel(2), p.total_numel() / 2);
  // FSDP over 3 pads: norm 256 rows -> ceil(256/3) = 86 per rank.
  ParamTensor norm{"n", 256, 1};
  EXPECT_EQ(norm.sharded_numel(3), 86);
}

TEST(ParamLayout, KvHeadsReplicatedWhenTpExceedsThem) {
  ModelSpec tiny = preset("tiny");  // 4 kv heads
  ParamLayout p = tp_param_layout(tiny, 8);
  EXPECT_EQ(p.kv_heads_per_rank, 1);
  // k_proj on each rank: one head (8 rows) x 64.
  EXPECT_EQ(p.layer[2].name, "self_attn.k_proj.weight");
  EXPECT_EQ(p.layer[2].numel(), 8 * 64);
}

// tiny, one rank, fp32, CPU, materialized attention asked for, b = 2, s = 256, no reserve.
// h = 64, I = 128, L = 2, heads a = 8, kv = 4 x 8 = 32, q = 64, V = 256, T = b*s = 512.
TEST(MemoryEstimate, TinySingleRankFp32Materialized) {
  ModelSpec tiny = preset("tiny");
  MemoryQuery q;
  q.model = tiny;
  q.shape = {1, 1, 1, 1};
  q.training.seq_len = 256;
  q.training.micro_batch = 2;
  q.training.precision = Precision::fp32;
  q.training.device = DeviceKind::cpu;
  q.knobs.attention = AttentionKernel::materialized;
  MemoryBreakdown m = estimate_memory(q);
  EXPECT_EQ(m.attention, AttentionKernel::materialized);
  EXPECT_EQ(m.reserve, 0);
  EXPECT_EQ(m.tokens, 512);
  EXPECT_EQ(m.params, 4 * 106'816);
  EXPECT_EQ(m.grads, 4 * 106'816);
  EXPECT_EQ(m.optimizer, 8 * 106'816);
  // Per layer (elements): norms 4*64*512 = 131,072; matmul inputs 2*64*512 = 65,536;
  // attention 4*64*512 = 131,072; scores 8 heads * 256 * 512 = 1,048,576; MLP 4*128*512 = 262,144.
  EXPECT_EQ(term(m, "activations.norms"), 2 * 4 * 131'072);
  EXPECT_EQ(term(m, "activations.matmul_inputs"), 2 * 4 * 65'536);
  EXPECT_EQ(term(m, "activations.attention"), 2 * 4 * 131'072);
  EXPECT_EQ(term(m, "activations.attention_scores"), 2 * 4 * 1'048'576);
  EXPECT_EQ(term(m, "activations.mlp"), 2 * 4 * 262'144);
  EXPECT_EQ(m.activations, 2 * 4 * (131'072 + 65'536 + 131'072 + 1'048'576 + 262'144));
  // Loss moment: head 4 B x (2*64 + 64) x 512 + 16 B x 512; logits 512 x 256 x (4 + 2 x 4) B.
  EXPECT_EQ(term(m, "loss.head"), 4 * 192 * 512 + 16 * 512);
  EXPECT_EQ(term(m, "loss.logits"), 512 * 256 * 12);
  // Last layer's attention backward: 2 x 1,048,576 score/prob gradients + 2h x 512 residual
  // gradients - (4 x 128 + 2 x 64 + 64) x 512 freed MLP side = 1,818,624 elements, fp32.
  EXPECT_EQ(m.backward_transient, 4 * 1'802'240);
  EXPECT_EQ(m.activations_total(), m.activations + 4 * 1'802'240);
  // No accumulation: only the root and one layer hold gradients at the backward peak.
  EXPECT_EQ(m.grads_at_backward_peak, 4 * (256 * 64 * 2 + 64 + 36'992));
  EXPECT_EQ(m.buffers(), 0);
  EXPECT_EQ(m.total(), m.params + m.grads_at_backward_peak + m.optimizer + m.activations_total());
  const MemoryBreakdown::Peak p = m.at_peak();
  EXPECT_EQ(p.params + p.grads + p.optimizer + p.activations + p.buffers + p.reserve, p.total);
}

TEST(MemoryEstimate, FusedAttentionKeepsNoScores) {
  ModelSpec tiny = preset("tiny");
  MemoryQuery q;
  q.model = tiny;
  q.shape = {1, 1, 1, 1};
  q.training.seq_len = 256;
  q.training.micro_batch = 2;
  q.training.precision = Precision::fp32;
  q.training.device = DeviceKind::cuda;
  q.knobs.reserve_bytes = 0;
  MemoryBreakdown m = estimate_memory(q);
  EXPECT_EQ(m.attention, AttentionKernel::fused);
  EXPECT_EQ(term(m, "activations.attention_scores"), -1);
  // q + k + v + out = 2*64 + 2*32 = 192 elements x 4 B + lse 8 heads x 4 B, per token and layer.
  EXPECT_EQ(term(m, "activations.attention"), 2 * (4 * 192 + 4 * 8) * 512);
  EXPECT_EQ(default_reserve_bytes(DeviceKind::cuda), int64_t{1} << 30);
  // LibTorch runs the flash kernel on CPU too: the same activations, no reserve.
  q.training.device = DeviceKind::cpu;
  q.knobs.reserve_bytes.reset();
  MemoryBreakdown cpu = estimate_memory(q);
  EXPECT_EQ(cpu.attention, AttentionKernel::fused);
  EXPECT_EQ(cpu.activations, m.activations);
  EXPECT_EQ(cpu.reserve, 0);
}

TEST(MemoryEstimate, SmallFsdpTpBf16) {
  // small on 4 ranks: dp_shard 2 x tp 2, bf16, fused, b = 1, s = 512.
  ModelSpec small = preset("small");
  MemoryQuery q;
  q.model = small;
  q.shape = {1, 2, 1, 2};
  q.training.seq_len = 512;
  q.training.micro_batch = 1;
  q.training.precision = Precision::bf16;
  q.training.device = DeviceKind::cuda;
  q.knobs.reserve_bytes = 0;
  MemoryBreakdown m = estimate_memory(q);
  // tp shard: 4 layers x 393,728 + 128*256 + 256 = 1,607,936; FSDP over 2 halves it.
  EXPECT_EQ(m.tp_params, 1'607'936);
  EXPECT_EQ(m.owned_params, 803'968);
  EXPECT_EQ(m.fsdp_shards, 2);
  EXPECT_EQ(m.params, 4 * 803'968);  // fp32 master shard only: the bf16 copy is a gather buffer
  EXPECT_EQ(m.grads, 4 * 803'968);
  EXPECT_EQ(m.optimizer, 8 * 803'968);
  // Gathered: (1 + 1 prefetch) x 393,728 x 2 B + root 33,024 x 2 B;
  // unsharded grad: max(393,728, 33,024) x (2 B + 4 B fp32 reduce copy).
  EXPECT_EQ(term(m, "fsdp.gathered_params"), 2 * 393'728 * 2 + 33'024 * 2);
  EXPECT_EQ(term(m, "fsdp.unsharded_grad"), 393'728 * 6);
  // NCCL reduce-scatters natively: no receive buffer of a whole unit (Gloo's all-to-all has one).
  EXPECT_EQ(term(m, "fsdp.reduce_scatter_recv"), -1);
  MemoryQuery on_cpu = q;
  on_cpu.training.device = DeviceKind::cpu;
  EXPECT_EQ(term(estimate_memory(on_cpu), "fsdp.reduce_scatter_recv"), 4 * 393'728);
  // Sequence parallel halves the norm activations: 4 x 256 x 512 / 2 elements, 2 B, 4 layers.
  EXPECT_EQ(term(m, "activations.norms"), 4 * 2 * (4 * 256 * 512 / 2));
  // MLP: 4 x 768/2 x 512 elements, 2 B, 4 layers.
  EXPECT_EQ(term(m, "activations.mlp"), 4 * 2 * (4 * 384 * 512));
  // Logits: 512 tokens x 128 vocab shard x (2 B + 8 B).
  EXPECT_EQ(term(m, "loss.logits"), 512 * 128 * 10);
  // One micro-batch a step: nothing is summed between micro-batches.
  EXPECT_EQ(term(m, "fsdp.accumulated_grads"), -1);
  // Two, reduce-scatter every micro-batch (the default, FSDP2's): shard gradients only.
  q.training.global_batch = 4;  // 2 micro-batches of 1 on each of the dp = 2 ranks
  EXPECT_EQ(term(estimate_memory(q), "fsdp.accumulated_grads"), -1);
  // Once per step (--fsdp-grad-sync step): every unit's unsharded (tp shard) fp32 gradient is
  // held until the last backward reduce-scatters it: 4 B x 1,607,936.
  q.training.fsdp_grad_sync = FsdpGradSync::step;
  EXPECT_EQ(term(estimate_memory(q), "fsdp.accumulated_grads"), 4 * 1'607'936);
  q.training.fsdp_grad_sync = FsdpGradSync::micro_batch;
  EXPECT_EQ(estimate_memory(q).total() + 4 * 1'607'936,
            [&] { MemoryQuery s = q; s.training.fsdp_grad_sync = FsdpGradSync::step; return estimate_memory(s).total(); }());
}

TEST(MemoryEstimate, ContextParallelDividesSequence) {
  ModelSpec small = preset("small");
  MemoryQuery q;
  q.model = small;
  q.shape = {1, 1, 1, 1};
  q.training.seq_len = 1024;
  q.training.precision = Precision::fp32;
  q.training.device = DeviceKind::cuda;
  MemoryBreakdown one = estimate_memory(q);
  q.shape = {1, 1, 4, 1};
  MemoryBreakdown four = estimate_memory(q);
  EXPECT_EQ(four.tokens, 256);
  EXPECT_EQ(term(four, "activations.mlp") * 4, term(one, "activations.mlp"));
  EXPECT_EQ(term(four, "loss.logits") * 4, term(one, "loss.logits"));
  // FSDP runs over dp_shard x cp = 4 even with dp_shard = 1.
  EXPECT_EQ(four.fsdp_shards, 4);
  EXPECT_EQ(four.owned_params * 4, one.owned_params);
  // Ring k/v blocks: 2 x 2 x 256 tokens x 128 (4 kv heads x 32) x 4 B.
  EXPECT_EQ(term(four, "cp.ring_kv"), 2 * 2 * 256 * 128 * 4);
}

TEST(MemoryEstimate, FullCheckpointingKeepsLayerInputs) {
  ModelSpec small = preset("small");
  MemoryQuery q;
  q.model = small;
  q.shape = {1, 1, 1, 1};
  q.training.seq_len = 256;
  q.training.precision = Precision::fp32;
  q.training.device = DeviceKind::cpu;
  q.training.activation_checkpointing = ActivationCheckpointing::full;
  MemoryBreakdown m = estimate_memory(q);
  EXPECT_EQ(term(m, "activations.checkpoints"), 4 * 4 * 256 * 256);  // L x 4 B x h x T
  // One recomputed layer: (4h + 2h + 4q + a*s + 4I) x T x 4 B with q = 256, a = 8.
  const int64_t per_token = 4 * 256 + 2 * 256 + 4 * 256 + 8 * 256 + 4 * 768;
  EXPECT_GE(m.backward_transient, 4 * per_token * 256);  // recomputed layer + its gradients
  MemoryQuery none = q;
  none.training.activation_checkpointing = ActivationCheckpointing::none;
  EXPECT_LT(m.activations, estimate_memory(none).activations);
}

TEST(MemoryEstimate, ReplicationBucketAndBf16Copies) {
  ModelSpec tiny = preset("tiny");
  MemoryQuery q;
  q.model = tiny;
  q.shape = {4, 1, 1, 1};
  q.training.seq_len = 64;
  q.training.precision = Precision::bf16;
  q.training.device = DeviceKind::cpu;
  MemoryBreakdown m = estimate_memory(q);
  EXPECT_EQ(m.owned_params, 106'816);  // no sharding
  EXPECT_EQ(m.params, 4 * 106'816 + 2 * 106'816);
  EXPECT_EQ(term(m, "bf16_grads"), 2 * 106'816);
  // meshtrain's per-unit buckets: one unit's fp32 gradient in flight, the larger of a layer
  // (64 + 3*4096 + 64 + 3*8192 = 36'992) and the root (2*256*64 + 64 = 32'832).
  EXPECT_EQ(term(m, "ddp.bucket"), 4 * 36'992);
  // torch DDP's fixed buckets: all grads fit in one 25 MiB bucket.
  q.knobs.ddp_unit_buckets = false;
  EXPECT_EQ(term(estimate_memory(q), "ddp.bucket"), 4 * 106'816);
  q.knobs.ddp_unit_buckets = true;
  // The optimizer phase holds the largest tensor's temporary: embedding 256 x 64 fp32.
  EXPECT_EQ(m.optimizer_step_temp, 4 * 256 * 64);
  EXPECT_GE(m.total(), m.step_phase());
}
