#include "core/time_estimate.h"

#include <algorithm>
#include <cmath>

#include "core/param_layout.h"
#include "core/rank_sizes.h"

namespace meshwork {

HardwareModel HardwareModel::h100() {
  HardwareModel hw;
  hw.overlap = {2.0 / 3.0, 1.0, 0.0, 0.0};
  return hw;
}

HardwareModel HardwareModel::cpu() {
  HardwareModel hw;
  hw.peak_flops_bf16 = 50e9;
  hw.peak_flops_fp32 = 50e9;
  hw.efficiency = 0.5;
  hw.intra_node_bytes_per_s = 2e9;
  hw.inter_node_bytes_per_s = 1.25e9;
  hw.latency_s = 50e-6;
  return hw;
}

int64_t flop_parameter_count(const ModelSpec& m) {
  // The embedding is a lookup (no FLOPs). Tied, the same matrix is the lm_head matmul: count it.
  return m.parameter_count() - (m.tie_word_embeddings ? 0 : m.embedding_parameter_count());
}

double model_flops_per_token(const ModelSpec& m, int64_t seq_len) {
  // 6N: each matmul weight does one multiply-add (2 FLOPs) per token forward and two backward
  // (input gradient and weight gradient): 2 + 4 = 6 FLOPs per parameter per token.
  // Attention scores and the weighted sum are matmuls without parameters: per layer and token,
  // q k^T costs 2 * s * (heads*head_dim) forward, probs @ v the same, so 4 * s * a * d forward
  // and 12 * s * a * d forward + backward. PaLM counts the full s x s (not the causal half);
  // torchtitan and nanoGPT do the same, so MFUs compare.
  const double n = static_cast<double>(flop_parameter_count(m));
  return 6.0 * n + 12.0 * static_cast<double>(m.num_hidden_layers) *
                       static_cast<double>(m.num_attention_heads * m.head_dim) *
                       static_cast<double>(seq_len);
}

namespace {

// Ring collectives over n ranks, M = the full (unsharded) tensor bytes. What each rank sends:
//   all-gather / reduce-scatter: (n-1)/n * M in n-1 steps;  all-reduce: 2(n-1)/n * M in 2(n-1)
// steps (a reduce-scatter then an all-gather; Patarasuk & Yuan 2009, NCCL's ring).
double ring_ag_bytes(double m, int64_t n) { return n > 1 ? m * (n - 1) / n : 0; }
double ring_ar_bytes(double m, int64_t n) { return n > 1 ? 2 * m * (n - 1) / n : 0; }

}  // namespace

TimeEstimate estimate_time(const TimeQuery& q) {
  TimeEstimate out;
  const ModelSpec& m = *q.model;
  const MeshShape& sh = q.shape;
  const HardwareModel& hw = q.hardware;
  const int64_t world = sh.world_size();
  const RankSizes z = rank_sizes(sh, q.micro_batch, q.seq_len, q.precision);
  const int64_t t = z.t, cp = z.cp, n_fsdp = z.n, mb = z.b, s = z.s;
  const int64_t r = sh[Axis::dp_replicate];
  const int64_t dp = int64_t{sh[Axis::dp_replicate]} * sh[Axis::dp_shard];
  const int64_t global = q.global_batch > 0 ? q.global_batch : mb * dp;
  out.grad_accum_steps = std::max<int64_t>(1, global / (mb * dp));
  const double ga = static_cast<double>(out.grad_accum_steps);
  const bool full_ac = q.activation_checkpointing == ActivationCheckpointing::full;
  const double c = static_cast<double>(z.c);
  const double L = static_cast<double>(m.num_hidden_layers);

  // ---- Compute ----
  // A token is processed once per data-parallel replica: its FLOPs are split over the tp x cp
  // ranks that share it, and dp ranks process different tokens, so per step the whole mesh does
  // tokens_per_step * flops_per_token, world ranks in parallel.
  out.model_flops_per_token = model_flops_per_token(m, s);
  // Full checkpointing recomputes the forward: + 2N + 4 L a d s (one third of 6N + 12 L a d s).
  out.hardware_flops_per_token = out.model_flops_per_token * (full_ac ? 4.0 / 3.0 : 1.0);
  out.tokens_per_step = static_cast<double>(global) * static_cast<double>(s);
  const double peak = hw.peak_flops(q.precision);
  out.compute_s = out.tokens_per_step * out.hardware_flops_per_token /
                  (static_cast<double>(world) * peak * hw.efficiency);

  // ---- Communication per axis ----
  auto mesh = DeviceMesh::create(sh, q.gpus_per_node > 0 ? q.gpus_per_node : static_cast<int>(world));
  auto link = [&](GroupKind kind, AxisComm& ax) {
    ax.crosses_nodes = mesh.ok() && mesh->any_group_crosses_nodes(kind);
    return ax.crosses_nodes ? hw.inter_node_bytes_per_s : hw.intra_node_bytes_per_s;
  };
  const ParamLayout layout = tp_param_layout(m, t, q.vocab_parallel);
  const double T = static_cast<double>(z.T);  // tokens per rank
  const double h = static_cast<double>(m.hidden_size);

  // tp (Megatron with sequence parallelism): per layer, forward all-gathers the norm output
  // before attention and before the MLP and reduce-scatters both block outputs; backward does
  // the mirror image. Each moves M = T * h * c bytes (the full micro-batch activation):
  // 8 (t-1)/t M per layer per micro-batch (without SP: 4 all-reduces, the same bytes); full
  // checkpointing adds the recomputed forward's 4. Vocab-parallel embedding and lm_head add one
  // collective each way (4 (t-1)/t M) and the parallel cross-entropy three all-reduces of
  // T floats (max, sum of exp, target logit).
  if (t > 1) {
    AxisComm& ax = out.comm[static_cast<int>(Axis::tp)];
    const double bw = link(GroupKind::tp, ax);
    const double M = T * h * c;
    const double per_layer = (full_ac ? 12 : 8) * ring_ag_bytes(M, t);
    const double root = 4 * ring_ag_bytes(M, t) + 3 * ring_ar_bytes(T * 4, t);
    ax.bytes = ga * (L * per_layer + root);
    const int per_mb = static_cast<int>(L) * (full_ac ? 12 : 8) + 4 + 3;
    ax.collectives = static_cast<int>(ga) * per_mb;
    // Ring steps: t-1 per all-gather / reduce-scatter, 2(t-1) per all-reduce.
    const double steps = ga * ((per_mb - 3) * (t - 1) + 3 * 2 * (t - 1));
    ax.seconds = ax.bytes / bw + steps * hw.latency_s;
  }

  // cp (ring attention): cp-1 ring steps per layer; forward passes the local k and v block
  // (T * kv * c each) to the next rank, backward passes k, v and their gradients (4 blocks).
  // Point-to-point: every rank sends and receives at once, so time = sent bytes / bandwidth.
  if (cp > 1) {
    AxisComm& ax = out.comm[static_cast<int>(Axis::cp)];
    const double bw = link(GroupKind::cp, ax);
    const double kv = static_cast<double>(layout.kv_heads_per_rank * m.head_dim);
    const double block = T * kv * c;
    const double blocks_per_step = (full_ac ? 4 : 2) + 4;
    ax.bytes = ga * L * static_cast<double>(cp - 1) * blocks_per_step * block;
    ax.collectives = static_cast<int>(ga * L * (full_ac ? 3 : 2) * (cp - 1));
    ax.seconds = ax.bytes / bw + ax.collectives * hw.latency_s;
  }

  // FSDP over dp_shard x cp (charged to dp_shard): every micro-batch all-gathers the parameters
  // in the compute dtype for forward and again for backward (reshard after forward); the fp32
  // gradients are reduce-scattered every micro-batch, or once per step with
  // fsdp_reduce_once_per_step (no sync on accumulation micro-batches).
  if (n_fsdp > 1) {
    AxisComm& ax = out.comm[static_cast<int>(Axis::dp_shard)];
    const double bw = link(GroupKind::dp_shard_cp, ax);
    const double P = static_cast<double>(layout.total_numel());
    const double reductions = q.fsdp_reduce_once_per_step ? 1.0 : ga;
    ax.bytes = ga * 2 * ring_ag_bytes(P * c, n_fsdp) + reductions * ring_ag_bytes(P * 4, n_fsdp);
    const int modules = static_cast<int>(m.num_hidden_layers) + 1;
    ax.collectives = static_cast<int>(ga) * 2 * modules + static_cast<int>(reductions) * modules;
    ax.seconds = ax.bytes / bw + ax.collectives * (n_fsdp - 1) * hw.latency_s;
  }

  // dp_replicate: one all-reduce of the fp32 gradients per step: of the FSDP shard under HSDP,
  // of the whole tp shard under DDP (in 25 MiB buckets).
  if (r > 1) {
    AxisComm& ax = out.comm[static_cast<int>(Axis::dp_replicate)];
    const double bw = link(GroupKind::dp_replicate, ax);
    const double G = 4.0 * static_cast<double>(n_fsdp > 1 ? layout.sharded_total_numel(n_fsdp)
                                                         : layout.total_numel());
    ax.bytes = ring_ar_bytes(G, r);
    ax.collectives = n_fsdp > 1 ? static_cast<int>(m.num_hidden_layers) + 1
                                : std::max(1, static_cast<int>(std::ceil(G / (25 << 20))));
    ax.seconds = ax.bytes / bw + ax.collectives * 2 * (r - 1) * hw.latency_s;
  }

  for (const auto& ax : out.comm) out.comm_s += ax.seconds;
  // Overlap: each axis may hide up to overlap[axis] x compute of its time, out of one shared
  // compute budget (a rank computes once, whatever it waits on), dp_shard first.
  double budget = out.compute_s;
  for (Axis a : {Axis::dp_shard, Axis::dp_replicate, Axis::cp, Axis::tp}) {
    const double frac = std::clamp(hw.overlap[static_cast<int>(a)], 0.0, 1.0);
    const double hidden = std::min({out.comm[static_cast<int>(a)].seconds, frac * out.compute_s, budget});
    budget -= hidden;
    out.hidden_comm_s += hidden;
  }
  out.step_s = out.compute_s + out.comm_s - out.hidden_comm_s;
  out.tokens_per_s = out.step_s > 0 ? out.tokens_per_step / out.step_s : 0;
  out.mfu = out.model_flops_per_token * out.tokens_per_s / (static_cast<double>(world) * peak);
  return out;
}

}  // namespace meshwork
