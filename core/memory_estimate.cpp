#include "core/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "core/param_layout.h"
#include "core/pipeline.h"
#include "core/pipeline_schedule.h"
#include "core/rank_sizes.h"

namespace meshwork {

std::string_view to_string(AttentionKernel a) {
  return a == AttentionKernel::fused ? "fused" : "materialized";
}

AttentionKernel default_attention_kernel(DeviceKind /*device*/) {
  // LibTorch 2.x dispatches scaled_dot_product_attention to a flash kernel on CPU as well
  // (_scaled_dot_product_flash_attention_for_cpu, GQA included) and on CUDA: no s x s matrix is
  // kept on either device. Measured with meshtrain on CPU: small s=1024 b=1 135.18 MiB vs a
  // fused estimate of 135.15 MiB (materialized: 307 MiB).
  return AttentionKernel::fused;
}

int64_t default_reserve_bytes(DeviceKind device) {
  return device == DeviceKind::cuda ? (int64_t{1} << 30) : 0;
}

int64_t MemoryBreakdown::activations_total() const {
  return activations + std::max(logits, backward_transient);
}

int64_t MemoryBreakdown::backward_phase() const {
  return params + grads_at_backward_peak + optimizer + activations_total() + buffers();
}

MemoryBreakdown::Peak MemoryBreakdown::at_peak() const {
  Peak p;
  p.params = params;
  p.optimizer = optimizer;
  p.reserve = reserve;
  if (backward_phase() >= step_phase()) {
    p.grads = grads_at_backward_peak;
    p.activations = activations_total();
    p.buffers = buffers();
  } else {
    p.grads = grads;
    p.optimizer += optimizer_step_temp;
  }
  p.total = total();
  return p;
}

std::vector<MemoryTerm> MemoryBreakdown::peak_terms() const {
  std::vector<MemoryTerm> out;
  if (backward_phase() >= step_phase()) {
    out = {{"params", params, "held through backward"},
           {"grads", grads_at_backward_peak, "gradients existing at the backward peak"},
           {"optimizer", optimizer, "AdamW moments"},
           {"activations", activations_total(), "saved activations + max(loss moment, last layer's backward)"},
           {"buffers", buffers(), "gather and communication buffers"}};
  } else {
    out = {{"params", params, "held through the optimizer step"},
           {"grads", grads, "every owned gradient"},
           {"optimizer", optimizer, "AdamW moments"},
           {"step temporaries", optimizer_step_temp, "AdamW step temporaries"}};
  }
  out.push_back({"reserve", reserve, "framework reserve"});
  return out;
}

int64_t MemoryBreakdown::step_phase() const {
  return params + grads + optimizer + optimizer_step_temp;
}

int64_t MemoryBreakdown::total() const {
  return std::max(backward_phase(), step_phase()) + reserve;
}

namespace {

std::string f(const char* format, long long a = 0, long long b = 0, long long c = 0,
              long long d = 0, long long e = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d, e);
  return buf;
}

struct StageShare {
  int rank = 0;
  int64_t layers = 0, held_layers = 0;
  // The most forwards in flight whose chunk sends its output on (every chunk but the head's):
  // the activations this stage may still be sending at its peak.
  int64_t held_sends = 0;
  bool embedding = true, head = true;
};

}  // namespace

int64_t MemoryQuery::grad_accum_steps() const {
  const int64_t per_step = int64_t{training.micro_batch} * shape.group_size(GroupKind::dp);
  if (training.global_batch <= 0 || per_step <= 0 || training.global_batch % per_step != 0) return 1;
  return training.global_batch / per_step;
}

namespace {

StageShare stage_share(const MemoryQuery& q) {
  StageShare out;
  const ModelSpec& m = q.model;
  const int pp = std::max(1, q.shape[Axis::pp]);
  out.layers = out.held_layers = m.num_hidden_layers;
  if (pp == 1) return out;
  const int v = q.training.pp_schedule == PipelineSchedule::interleaved_1f1b ? std::max(1, q.training.pp_virtual_stages) : 1;
  out.rank = std::clamp(q.pp_stage, 0, pp - 1);
  const std::vector<PipelineChunk> chunks = pipeline_cut(m, q.training.seq_len, pp, v);
  out.layers = 0;
  out.embedding = out.head = false;
  for (const PipelineChunk& c : chunks) {
    if (c.rank != out.rank) continue;
    out.layers += c.num_layers;
    out.embedding = out.embedding || c.embedding;
    out.head = out.head || c.head;
  }
  int64_t held = 0, sends = 0;
  out.held_layers = 0;
  for (const PipelineAction& a : pipeline_schedule(q.training.pp_schedule, pp, v, q.grad_accum_steps(), out.rank)) {
    const PipelineChunk& c = chunks[static_cast<size_t>(a.chunk)];
    const int sign = a.kind == PipelineAction::forward ? 1 : -1;
    held += sign * c.num_layers;
    if (!c.head) sends += sign;
    out.held_layers = std::max(out.held_layers, held);
    out.held_sends = std::max(out.held_sends, sends);
  }
  return out;
}

}  // namespace

// Notation (per rank): b = micro_batch, s = seq_len, cp, tp = t, s_cp = s / cp,
// T = b * s_cp tokens of one micro-batch on this rank, h = hidden, I = intermediate,
// q = heads*head_dim / t, kv = kv_heads_per_rank*head_dim, a = heads / t, L = layers (of this
// pipeline stage), La = layer-micro-batches whose activations the stage holds at its peak,
// V = vocab / t (vocab-parallel), c = bytes of the compute dtype (4 fp32, 2 bf16),
// n = dp_shard * cp (the FSDP group, torchtitan's dp_shard_cp).
MemoryBreakdown estimate_memory(const MemoryQuery& q) {
  MemoryBreakdown out;
  const ModelSpec& m = q.model;
  const MemoryModel& k = q.knobs;
  auto add = [&](int64_t& field, std::string name, int64_t bytes, std::string formula) {
    field += bytes;
    out.terms.push_back({std::move(name), bytes, std::move(formula)});
  };

  const RankSizes z = rank_sizes(q.shape, q.training.micro_batch, q.training.seq_len, q.training.precision);
  const int64_t t = z.t, cp = z.cp, n = z.n, b = z.b, s = z.s, s_cp = z.s_cp, T = z.T, c = z.c;
  // Mixture of experts: the experts are FSDP-sharded over ne ranks (efsdp with ep > 1), the
  // rest over n; either sharding makes the rank keep only shards.
  const int64_t ne = m.is_moe() ? std::max<int64_t>(1, q.shape.ep > 1 ? n * t / q.shape.ep : n) : n;
  const bool fsdp = n > 1 || ne > 1;
  const bool bf16 = q.training.precision == Precision::bf16;
  const bool sp = q.training.sequence_parallel && t > 1;
  const int64_t t_sp = sp ? t : 1;
  const int64_t h = m.hidden_size;
  // Pipeline: this stage's decoder layers (L), whether it holds the embedding / the head, and the
  // layer-micro-batches whose activations it keeps at its peak (La): the schedule's forwards not
  // yet backwarded, each weighing its chunk's layers (pp = 1: one micro-batch, La = L).
  const StageShare stage = stage_share(q);
  const int64_t L = stage.layers, La = stage.held_layers;
  const ParamLayout layout =
      stage_param_layout(tp_param_layout(m, t, q.trainer.vocab_parallel, q.shape.ep), L, stage.embedding, stage.head);
  out.pp_stage = stage.rank;
  out.stage_layers = L;
  out.held_layers = La;
  const int64_t q_loc = m.q_dim() / t;
  const int64_t kv_loc = layout.kv_heads_per_rank * m.head_dim;
  const int64_t a_loc = std::max<int64_t>(1, m.num_attention_heads / t);
  const int64_t i_loc = m.intermediate_size / t;
  const int64_t v_loc = q.trainer.vocab_parallel ? m.vocab_size / t : m.vocab_size;

  out.attention = k.attention.value_or(default_attention_kernel(q.training.device));
  out.fsdp_shards = n;
  out.expert_shards = ne;
  out.tokens = T;
  out.tp_params = layout.total_numel();
  out.owned_params = fsdp ? layout.sharded_total_numel(n) : layout.total_numel();
  const int64_t P = out.owned_params;

  // ---- Model state (ZeRO paper's 4 + 4 + 8 bytes per parameter, Rajbhandari et al. 2020) ----
  // FSDP shards every tensor on dim 0 over n = dp_shard*cp ranks (FSDP2 pads dim 0 to a multiple
  // of n), so each rank owns sum(ceil(rows/n)*cols); without FSDP it owns its whole tp shard.
  // fp32: parameters 4 B. bf16 (mixed precision): the owned master copy stays fp32 (4 B); the
  // bf16 compute copy is an FSDP gather buffer, or without FSDP a full bf16 copy (2 B).
  add(out.params, "params", 4 * P, f("4 B x %lld owned parameters", P));
  if (bf16 && !fsdp)
    add(out.params, "params.bf16_copy", 2 * layout.total_numel(),
        f("2 B x %lld parameters (bf16 compute copy, no FSDP)", layout.total_numel()));
  // Gradients are reduced and kept in fp32 next to the fp32 master parameters.
  add(out.grads, "grads", 4 * P, f("4 B x %lld owned parameters", P));
  // AdamW keeps exp_avg and exp_avg_sq in fp32 for every owned parameter.
  add(out.optimizer, "optimizer", 8 * P, f("8 B x %lld owned parameters (AdamW m, v)", P));
  // torch::optim::AdamW steps one tensor at a time; its denominator sqrt(v)/bc2 + eps is one
  // temporary of the largest owned tensor (activations are freed by then: a separate phase).
  const int64_t max_owned = fsdp ? (layout.max_tensor_numel() + n - 1) / n : layout.max_tensor_numel();
  out.optimizer_step_temp = 4 * max_owned;
  out.terms.push_back({"optimizer.step_temp", out.optimizer_step_temp,
                       f("4 B x %lld (largest owned tensor; optimizer-step phase only)", max_owned)});

  // ---- Activations saved for backward (Korthikanti et al. 2022, "Reducing Activation
  // Recomputation in Large Transformer Models", section 4, redone for the Llama block) ----
  // Per layer and token, autograd keeps (elements):
  //   RMSNorm x2: input x and x*rstd (the product with the weight saves x*rstd)    4h / t_sp
  //   inputs of q/k/v and gate/up matmuls (all-gathered over tp under SP)         2h
  //   attention: fused  q + k + v + out (+ fp32 lse: a per head)                   2q + 2kv
  //              materialized: q, k and v expanded to the local heads, out        4q
  //                            + softmax probabilities a * s per token             a*s
  //   MLP: gate, silu(gate), up, silu(gate)*up                                     4I/t
  // RoPE's cos/sin and the causal mask are shared across layers and tokens (negligible).
  // Sequence is s/cp per rank (cp splits the sequence); tp divides heads and I; sequence
  // parallelism divides the norm regions by t. GPT's 34sbh + 5as^2b (2-byte) has the same
  // structure with a 4h GELU MLP, dropout masks and biases.
  const bool ring = cp > 1;  // ring attention: custom autograd keeps q,k,v,out,lse per block
  const bool materialized = out.attention == AttentionKernel::materialized;
  const int64_t norms_e = 4 * h * T / t_sp;
  const int64_t inputs_e = 2 * h * T;
  int64_t attn_e = 0, attn_fp32_e = 0, scores_e = 0;
  if (materialized && !ring) {
    attn_e = 4 * q_loc * T;
    scores_e = a_loc * s * T;  // b * a * s_cp * s: queries of this rank against every key
  } else {
    attn_e = (2 * q_loc + 2 * kv_loc) * T;
    attn_fp32_e = a_loc * T;  // log-sum-exp per head and token
  }
  const int64_t mlp_e = 4 * i_loc * T;
  // Mixture of experts: a sparse layer saves, instead of the dense MLP's 4I/t per token, per
  // token copy routed to this rank's experts (R of them, below): the dispatched input and the
  // expert's output (2h, the combine weighs it) and gate, silu(gate), up and their product
  // (4 I_e); and per token the router's fp32 logits and probabilities (2E). R = top-k x T_e:
  // T_e = T / t with ep > 1 (the tp ranks ep borrows route their own sequence shards); with
  // ep = 1 the experts are whole on every tp rank, which routes its own sequence-parallel rows
  // (T_e = T / t_sp; all T without sequence parallelism). With ep > 1 the busiest rank gets
  // moe_imbalance times the mean.
  const MoeSpec& moe = m.moe;
  const bool ep_on = q.shape.ep > 1;
  const int64_t T_e = m.is_moe() ? std::max<int64_t>(1, T / (ep_on ? t : t_sp)) : T;
  const int64_t ie_loc = m.is_moe() ? moe.expert_intermediate_size : 0;
  const int64_t R = m.is_moe() ? static_cast<int64_t>(static_cast<double>(moe.experts_per_token * T_e) *
                                                      (ep_on ? std::max(1.0, k.moe_imbalance) : 1.0))
                               : 0;
  out.routed_tokens = R;
  const int64_t moe_e = R * (2 * h + 4 * ie_loc);
  const int64_t router_fp32_e = 2 * moe.num_experts * T_e;
  // The stage's layer-micro-batches split between sparse and dense MLPs in the stage's proportion.
  const int64_t La_sparse = L > 0 ? La * layout.sparse_layers / L : 0;
  const int64_t La_dense = La - La_sparse;
  const int64_t layer_bytes =
      c * (norms_e + inputs_e + attn_e + scores_e) + 4 * attn_fp32_e +
      std::max(layout.sparse_layers < L ? c * mlp_e : 0, layout.sparse_layers > 0 ? c * moe_e + 4 * router_fp32_e : 0);

  if (q.training.activation_checkpointing == ActivationCheckpointing::none) {
    add(out.activations, "activations.norms", La * c * norms_e,
        f("L=%lld x %lld B x 4h=%lld x T=%lld / t_sp=%lld", La, c, 4 * h, T, t_sp));
    add(out.activations, "activations.matmul_inputs", La * c * inputs_e,
        f("L=%lld x %lld B x 2h=%lld x T=%lld", La, c, 2 * h, T));
    add(out.activations, "activations.attention", La * (c * attn_e + 4 * attn_fp32_e),
        materialized && !ring
            ? f("L=%lld x %lld B x 4q=%lld x T=%lld", La, c, 4 * q_loc, T)
            : f("L=%lld x (%lld B x (2q+2kv)=%lld + 4 B x a=%lld) x T=%lld", La, c,
                2 * q_loc + 2 * kv_loc, a_loc, T));
    if (scores_e)
      add(out.activations, "activations.attention_scores", La * c * scores_e,
          f("L=%lld x %lld B x b=%lld x a=%lld x s_cp*s=%lld", La, c, b, a_loc, s_cp * s));
    if (La_dense > 0)
      add(out.activations, "activations.mlp", La_dense * c * mlp_e,
          f("L=%lld x %lld B x 4I/t=%lld x T=%lld", La_dense, c, 4 * i_loc, T));
    if (La_sparse > 0) {
      add(out.activations, "activations.experts", La_sparse * c * moe_e,
          f("L=%lld x %lld B x (2h + 4I_e)=%lld x R=%lld routed token copies", La_sparse, c, 2 * h + 4 * ie_loc, R));
      add(out.activations, "activations.router", La_sparse * 4 * router_fp32_e,
          f("L=%lld x 4 B x 2E=%lld x T_e=%lld", La_sparse, 2 * moe.num_experts, T_e));
    }
  } else {
    // Full checkpointing keeps only each layer's input (sharded by sequence parallelism,
    // Korthikanti's 2sbh/t); backward recomputes one layer at a time (counted below).
    add(out.activations, "activations.checkpoints", La * c * h * T / t_sp,
        f("L=%lld x %lld B x h=%lld x T=%lld / t_sp=%lld", La, c, h, T, t_sp));
  }

  // ---- Backward: two moments compete for the peak (only the larger one counts) ----
  // Autograd frees a node's saved tensors once its backward has run, so on top of the saved
  // activations above, backward holds:
  // (A) at the loss: the head's saved tensors (final norm 2h/t_sp, lm_head input h, token ids
  //     and targets 16 B) and the logits: T x V/t in the compute dtype (the logits' gradient,
  //     or the logits themselves) plus logits_fp32_copies fp32 tensors (cross-entropy's saved
  //     log-softmax output and its gradient);
  // (B) in the last layer's backward (the head's tensors are gone by then), the larger of
  //     MLP: gradients of the down input, gate and up (3I/t) + residual gradients in/out (2h);
  //     attention, materialized: probability and score gradients (2 a s per token) + residual
  //     gradients (2h), while that layer's MLP side (4I/t + 2h/t_sp + h) is already freed;
  //     ring attention recomputes one s_cp x s_cp block: 2 a s_cp per token.
  //     Under full checkpointing (B) also holds the recomputed layer's activations.
  const int64_t head_bytes = c * (2 * h * T / t_sp + h * T) + 16 * T;
  const double logit_bytes_per = static_cast<double>(c) + 4.0 * k.logits_fp32_copies;
  const int64_t logits_bytes =
      static_cast<int64_t>(static_cast<double>(T * v_loc) * logit_bytes_per);
  if (stage.head) {  // only the stage that holds the head computes the loss
    add(out.logits, "loss.head", head_bytes,
        f("%lld B x (2h/t_sp + h)=%lld x T=%lld + 16 B x T", c, 2 * h / t_sp + h, T));
    add(out.logits, "loss.logits", logits_bytes,
        f("T=%lld x V/t=%lld x (%lld B + 4 B x copies)", T, v_loc, c));
  }

  // A sparse layer's MLP backward: the gradients of each routed copy's down input, gate and up
  // (3 I_e) and of its dispatched input and output (2h), besides the residual's (2h).
  const int64_t mlp_extra_e =
      std::max(layout.sparse_layers < L ? (3 * i_loc + 2 * h) * T : 0,
               layout.sparse_layers > 0 ? R * (3 * ie_loc + 2 * h) + 2 * h * T : 0);
  int64_t attn_extra_e = 0;
  if (materialized) {
    const int64_t probs_grads = ring ? 2 * a_loc * s_cp * T : 2 * scores_e;
    attn_extra_e = std::max<int64_t>(
        0, probs_grads + 2 * h * T - (4 * i_loc + 2 * h / t_sp + h) * T);
  }
  int64_t transient = c * std::max(mlp_extra_e, attn_extra_e);
  transient = static_cast<int64_t>(k.backward_transient_layers * static_cast<double>(transient));
  if (q.training.activation_checkpointing == ActivationCheckpointing::full) transient += layer_bytes;
  add(out.backward_transient, "backward.layer", transient,
      f(attn_extra_e > mlp_extra_e
            ? "%lld B x (2 a s_kv + 2h - 4I/t - 2h/t_sp - h) x T=%lld (attention backward)"
            : "%lld B x (3I/t + 2h) x T=%lld (MLP backward)",
        c, T) +
          (q.training.activation_checkpointing == ActivationCheckpointing::full
               ? " + recomputed layer " + std::to_string(layer_bytes) + " B"
               : ""));

  // A sparse layer's expert weight gradients: each expert's GEMMs read its slice of the stacked
  // [E/ep, ., .] tensors, so autograd hands every slice's gradient back as a zero-padded tensor
  // of the whole stack and sums them: the three stacks' sums and one padded slice gradient are
  // live at once, (3 + 1) x (E/ep) x I_e x h elements, before the layer's weight gradient is
  // reduced.
  if (layout.sparse_layers > 0 && L > 0) {
    const int64_t local_experts = moe.num_experts / std::max<int64_t>(1, q.shape.ep);
    add(out.backward_transient, "backward.expert_grads",
        c * 4 * local_experts * moe.expert_intermediate_size * h,
        f("%lld B x (3 + 1) x E/ep=%lld x I_e=%lld x h=%lld", c, local_experts, moe.expert_intermediate_size, h));
  }

  // Gradients at the backward peak: zero_grad(set_to_none) frees them after each step, so with
  // no accumulation only the modules already through backward hold theirs at the peak (at most
  // the root and one layer); with accumulation they persist across micro-batches.
  const bool grads_rebuilt = k.grads_freed_between_steps && q.grad_accum_steps() <= 1;
  out.grads_at_backward_peak =
      grads_rebuilt ? 4 * (fsdp ? layout.sharded_root_numel(n) + layout.sharded_layer_numel(n)
                                : layout.root_numel() + layout.layer_numel())
                    : out.grads;

  // ---- Buffers ----
  // The all-to-all of one dispatch (or combine) in flight: the token copies this rank sends and
  // those it receives, h each, in the compute dtype (the received ones then stay as the
  // experts' saved inputs, counted above). A rank sends its own top-k x T_e copies whatever
  // the routing; only what the busiest rank receives grows with the imbalance (R).
  const int64_t a2a_sent = moe.experts_per_token * T_e;
  const int64_t a2a_bytes = ep_on && layout.sparse_layers > 0 ? c * (a2a_sent + R) * h : 0;
  // Expert parallelism: meshtrain keeps each sparse block as two flat parameters, the dense part
  // (attention, norms, router) sharded over n and the experts over ne, whatever n and ne (even 1).
  // Such a block is never prefetched. Gathering it all-gathers both parts and concatenates them
  // into the block's storage; its backward frees that storage first, then cuts its gradient into
  // the dense and expert parts (padded to their groups) and reduce-scatters one after the other.
  const bool split_blocks = ep_on && layout.sparse_layers > 0;
  if (split_blocks) {
    auto numel_of = [](const std::vector<ParamTensor>& ts) {
      int64_t sum = 0;
      for (const ParamTensor& p : ts) sum += p.numel();
      return sum;
    };
    const int64_t Ne = numel_of(layout.experts);
    const int64_t Ls = numel_of(layout.layer) + numel_of(layout.router) + Ne;
    const int64_t Nd = Ls - Ne;
    const int64_t d_pad = (Nd + n - 1) / n * n, e_pad = (Ne + ne - 1) / ne * ne;
    // A dense block of a mixed model stays one flat parameter and is prefetched while a sparse
    // block computes; the root is gathered only when sharded (n > 1).
    const int64_t Ld = layout.dense_mlp_layers > 0 ? numel_of(layout.layer) + numel_of(layout.dense_mlp) : 0;
    const int64_t Rp = n > 1 ? layout.root_numel() : 0;
    add(out.gather_buffers, "fsdp.gathered_params", Ls * c + k.fsdp_prefetch_layers * Ld * c + Rp * c,
        f("sparse block %lld params x %lld B + %lld prefetch x dense block %lld params x %lld B + root", Ls, c,
          k.fsdp_prefetch_layers, Ld, c) +
            std::to_string(Rp) + " params");
    // Past the gathered block, three moments of the last sparse block's backward compete:
    //   (G) its gather: the two all-gathered parts (compute dtype) before the concatenation;
    //   (A) its layer's backward: the backward transient (or the loss moment, if larger) and
    //       the all-to-all buffers, counted with the activations and the comm buffers;
    //   (R) its reduction, the block's last backward node: the block's gradient takes the
    //       freed storage's place, plus its fp32 copy under bf16, the two padded fp32 parts,
    //       the two reduce-scattered shards and, on Gloo, the receive buffer of the larger
    //       part's reduce-scatter over a group of more than one. By then the layer's own saved
    //       activations and its backward transient are freed.
    // Only what (G) or (R) hold beyond (A) is added here, so the total is the largest moment.
    const int64_t gather_parts = (d_pad + e_pad) * c;
    const int64_t recv = q.training.device == DeviceKind::cpu ? 4 * std::max(n > 1 ? d_pad : 0, ne > 1 ? e_pad : 0) : 0;
    const int64_t reduce_parts = (bf16 ? 4 * Ls : 0) + 4 * (d_pad + e_pad) + 4 * (d_pad / n + e_pad / ne) + recv;
    const int64_t sparse_layer_saved =
        q.training.activation_checkpointing == ActivationCheckpointing::none
            ? c * (norms_e + inputs_e + attn_e + scores_e + moe_e) + 4 * (attn_fp32_e + router_fp32_e)
            : c * h * T / t_sp;
    const int64_t layer_moment = std::max(out.logits, out.backward_transient) + a2a_bytes;
    const int64_t beyond = std::max<int64_t>(
        {0, gather_parts - layer_moment, reduce_parts - sparse_layer_saved - layer_moment});
    add(out.gather_buffers, "fsdp.unsharded_grad", beyond,
        f("max(0, gather %lld, reduce %lld - layer's saved %lld) - layer backward %lld B", gather_parts, reduce_parts,
          sparse_layer_saved, layer_moment) +
            f(" (gather: (dense %lld + experts %lld) x %lld B; reduce: 4 B x (parts + shards + recv %lld) + bf16 copy)",
              d_pad, e_pad, c, recv / 4));
    if (q.training.fsdp_grad_sync == FsdpGradSync::step && q.grad_accum_steps() > 1) {
      add(out.gather_buffers, "fsdp.accumulated_grads", 4 * layout.total_numel(),
          f("4 B x %lld unsharded parameters (gradients summed over %lld micro-batches)",
            layout.total_numel(), q.grad_accum_steps()));
    }
  } else if (fsdp) {
    // FSDP2: the layer computing plus fsdp_prefetch_layers all-gathered ahead, in the compute
    // dtype; the root module (embedding, final norm, lm_head) stays unsharded between forward
    // and backward; in backward the module computing holds its unsharded gradient (compute
    // dtype) and, under bf16, the fp32 copy reduce-scattered.
    const int64_t Lp = layout.layer_numel();
    const int64_t Rp = layout.root_numel();
    const int64_t grad_unsharded = std::max(Lp, Rp) * (c + (bf16 ? 4 : 0));
    add(out.gather_buffers, "fsdp.gathered_params", (1 + k.fsdp_prefetch_layers) * Lp * c + Rp * c,
        f("(1 + %lld prefetch) x %lld layer params x %lld B + %lld root params x %lld B",
          k.fsdp_prefetch_layers, Lp, c, Rp, c));
    add(out.gather_buffers, "fsdp.unsharded_grad", grad_unsharded,
        f("max(layer %lld, root %lld) params x %lld B", Lp, Rp, c + (bf16 ? 4 : 0)));
    if (q.training.device == DeviceKind::cpu) {
      // Gloo has no reduce-scatter of its own; meshtrain's (an all-to-all, then a local sum)
      // receives every member's block of the unit: a second fp32 unit while it runs.
      add(out.comm_buffers, "fsdp.reduce_scatter_recv", 4 * std::max(Lp, Rp),
          f("4 B x max(layer %lld, root %lld) params (Gloo all-to-all receive buffer)", Lp, Rp));
    }
    if (q.training.fsdp_grad_sync == FsdpGradSync::step && q.grad_accum_steps() > 1) {
      // --fsdp-grad-sync step: summed over the micro-batches before the last one,
      // reduce-scattered in the last backward: at its peak (its start) every unit still holds
      // its full fp32 sum.
      add(out.gather_buffers, "fsdp.accumulated_grads", 4 * layout.total_numel(),
          f("4 B x %lld unsharded parameters (gradients summed over %lld micro-batches)",
            layout.total_numel(), q.grad_accum_steps()));
    }
  } else if (bf16) {
    add(out.gather_buffers, "bf16_grads", 2 * layout.total_numel(),
        f("2 B x %lld parameters (bf16 gradients before the fp32 cast)", layout.total_numel()));
  }
  if (q.shape[Axis::dp_replicate] > 1 && !fsdp) {
    const int64_t grad_bytes = 4 * layout.total_numel();
    if (k.ddp_unit_buckets) {
      const int64_t unit = 4 * std::max(layout.layer_numel(), layout.root_numel());
      add(out.comm_buffers, "ddp.bucket", unit,
          f("4 B x max(layer %lld, root %lld) params (one unit's gradient in flight)",
            layout.layer_numel(), layout.root_numel()));
    } else {
      const int64_t bucket =
          k.ddp_bucket_bytes > 0 ? std::min(k.ddp_bucket_bytes, grad_bytes) : grad_bytes;
      add(out.comm_buffers, "ddp.bucket", bucket,
          f("min(bucket %lld B, fp32 grads %lld B)", k.ddp_bucket_bytes, grad_bytes));
    }
  }
  if (a2a_bytes > 0)
    add(out.comm_buffers, "ep.all_to_all", a2a_bytes,
        f("%lld B x (sent %lld + received R=%lld) copies x h=%lld", c, a2a_sent, R, h));
  if (ring) {
    // The k/v block being sent and the one being received around the cp ring.
    add(out.comm_buffers, "cp.ring_kv", 2 * 2 * T * kv_loc * c,
        f("2 (send, recv) x 2 (k, v) x T=%lld x kv=%lld x %lld B", T, kv_loc, c));
  }

  if (q.shape[Axis::pp] > 1) {
    // The residual stream between blocks, h per token (sharded by sequence parallelism): one
    // activation (or gradient) arriving from the neighbour stage, and the outputs still being
    // sent. meshtrain sends without waiting and a send holds its activation until the neighbour
    // has taken it, which in a warm-up is as late as the neighbour's own forward of that
    // micro-batch: up to one per forward in flight on a chunk that sends (measured on Gloo,
    // bench/pipeline.sh).
    // Every stage but the first also sends a gradient back after each backward.
    const int64_t grad_sends = stage.rank > 0 ? 1 : 0;
    const int64_t buffers = 1 + stage.held_sends + grad_sends;
    add(out.comm_buffers, "pp.p2p", buffers * c * h * T / t_sp,
        f("(1 recv + %lld activation sends + %lld gradient send) x %lld B x h=%lld x T/t_sp=%lld", stage.held_sends,
          grad_sends, c, h, T / t_sp));
  }

  out.reserve = k.reserve_bytes.value_or(default_reserve_bytes(q.training.device));
  out.terms.push_back({"reserve", out.reserve, "framework reserve"});
  return out;
}

std::vector<MemoryBreakdown> estimate_memory_stages(const MemoryQuery& query) {
  std::vector<MemoryBreakdown> out;
  const int pp = std::max(1, query.shape[Axis::pp]);
  for (int stage = 0; stage < pp; ++stage) {
    MemoryQuery q = query;
    q.pp_stage = stage;
    out.push_back(estimate_memory(q));
  }
  return out;
}

MemoryBreakdown worst_stage_memory(const MemoryQuery& query) {
  std::vector<MemoryBreakdown> stages = estimate_memory_stages(query);
  size_t worst = 0;
  for (size_t i = 1; i < stages.size(); ++i)
    if (stages[i].total() > stages[worst].total()) worst = i;
  return std::move(stages[worst]);
}

}  // namespace meshwork
