#include "core/time_estimate.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/param_layout.h"
#include "core/pipeline.h"
#include "core/pipeline_schedule.h"
#include "core/rank_sizes.h"

namespace meshwork {

HardwareModel HardwareModel::h100() {
  HardwareModel hw;
  hw.overlap[Axis::dp_replicate] = 2.0 / 3.0;
  hw.overlap[Axis::dp_shard] = 1.0;
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
  const int64_t n = m.is_moe() ? m.active_parameter_count() : m.parameter_count();
  return n - (m.tie_word_embeddings ? 0 : m.embedding_parameter_count());
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

// What one pipeline stage runs: its decoder layers, the embedding / head when it holds the
// first / last chunk, and its share of the model's compute (pipeline_costs). pp = 1: everything.
struct StagePart {
  int64_t layers = 0;
  bool embedding = true, head = true;
  double compute_share = 1.0;
};

// Elements of a mixture of experts' stage whose gradients meshtrain all-reduces over tp after
// the step (see the tp term): norms, q/k norms and routers under sequence parallelism, the
// experts too with ep = 1, and the copied k/v heads times their kv groups when t > kv heads.
// 0 for a dense model, whose norms' sum the estimate leaves out (a few h floats per layer).
double moe_tp_partial_grad_numel(const ModelSpec& m, const ParamLayout& layout, bool sequence_parallel, int ep,
                                 double layers, double sparse_layers, bool head) {
  if (!m.is_moe() || layout.tp <= 1) return 0;
  const bool kv_copied = layout.tp > m.num_key_value_heads;
  auto is_norm = [](const std::string& name) { return name.find("norm") != std::string::npos; };
  auto is_kv = [](const std::string& name) {
    return name.rfind("self_attn.k_proj", 0) == 0 || name.rfind("self_attn.v_proj", 0) == 0;
  };
  double per_layer = 0;
  for (const ParamTensor& p : layout.layer) {
    if (sequence_parallel && is_norm(p.name)) per_layer += static_cast<double>(p.numel());
    if (kv_copied && is_kv(p.name)) per_layer += static_cast<double>(p.numel() * m.num_key_value_heads);
  }
  double n = layers * per_layer;
  if (sequence_parallel) {
    double per_sparse = 0;
    for (const ParamTensor& p : layout.router) per_sparse += static_cast<double>(p.numel());
    if (ep <= 1)
      for (const ParamTensor& p : layout.experts) per_sparse += static_cast<double>(p.numel());
    n += sparse_layers * per_sparse;
    if (head)
      for (const ParamTensor& p : layout.root)
        if (is_norm(p.name)) n += static_cast<double>(p.numel());
  }
  return n;
}

// The step of one stage without the pipeline's waiting: the formulas below for its own layers.
TimeEstimate estimate_stage(const TimeQuery& q, const StagePart& part) {
  TimeEstimate out;
  const ModelSpec& m = q.model;
  const MeshShape& sh = q.shape;
  const HardwareModel& hw = q.hardware;
  const int64_t world = sh.world_size();
  const RankSizes z = rank_sizes(sh, q.training.micro_batch, q.training.seq_len, q.training.precision);
  const int64_t t = z.t, cp = z.cp, n_fsdp = z.n, mb = z.b, s = z.s;
  const int64_t r = sh[Axis::dp_replicate];
  const int64_t dp = int64_t{sh[Axis::dp_replicate]} * sh[Axis::dp_shard];
  const int64_t global = q.training.global_batch > 0 ? q.training.global_batch : mb * dp;
  out.grad_accum_steps = std::max<int64_t>(1, global / (mb * dp));
  const double ga = static_cast<double>(out.grad_accum_steps);
  const bool full_ac = q.training.activation_checkpointing == ActivationCheckpointing::full;
  const double c = static_cast<double>(z.c);
  const double L = static_cast<double>(part.layers);  // this stage's decoder layers
  const double pp = static_cast<double>(std::max(1, sh[Axis::pp]));

  // ---- Compute ----
  // A token is processed once per data-parallel replica: its FLOPs are split over the tp x cp
  // ranks that share it, and dp ranks process different tokens, so per step the whole mesh does
  // tokens_per_step * flops_per_token, world ranks in parallel:
  //   compute_s = tokens_per_step * flops_per_token / (world * rate * efficiency)
  // rate: the calibration's measured matmul rate of a rank (at the precision, with as many ranks
  // sharing a node as this run has, for matmuls split tp x cp ways) when there is one, else
  // HardwareModel's peak; efficiency:
  // with a calibrated rate, the calibration's measured step efficiency (else
  // kUnmeasuredStepEfficiency); without one, HardwareModel's.
  out.model_flops_per_token = model_flops_per_token(m, s);
  // Full checkpointing recomputes the forward: + 2N + 4 L a d s (one third of 6N + 12 L a d s).
  out.hardware_flops_per_token = out.model_flops_per_token * (full_ac ? 4.0 / 3.0 : 1.0);
  // Mixture of experts with ep > 1: the busiest ep rank computes moe_imbalance times its share of
  // the experts' 6 x top-k x expert parameters per token, and the step waits for it.
  const bool moe_ep = m.is_moe() && sh.ep > 1;
  const double gamma = moe_ep ? std::max(1.0, q.moe_imbalance) : 1.0;
  out.tokens_per_step = static_cast<double>(global) * static_cast<double>(s);
  const int ranks_per_node = q.gpus_per_node > 0 ? q.gpus_per_node : static_cast<int>(world);
  const Calibration* cal = q.calibration ? &*q.calibration : nullptr;
  // The experts' share of a token's hardware FLOPs (a mixture of experts; 0 for a dense model):
  // 6 x top-k x one expert's parameters per sparse layer.
  const double expert_flops = m.is_moe() ? 6.0 * static_cast<double>(m.moe.experts_per_token *
                                                                     m.expert_parameter_count() *
                                                                     m.sparse_layer_count()) *
                                               (full_ac ? 4.0 / 3.0 : 1.0)
                                         : 0.0;
  // CPU ranks per core on the busiest machine (core/calibration.h); 0 on GPUs or uncalibrated.
  const double cpu_sharing =
      q.training.device == DeviceKind::cpu && cal && cal->fingerprint.device == DeviceKind::cpu &&
              std::any_of(cal->fingerprint.nodes.begin(), cal->fingerprint.nodes.end(),
                          [](const ClusterFingerprint::Node& n) { return n.cores > 0; })
          ? cal->cpu_sharing(ranks_per_node)
          : 0.0;
  double gamma_compute = 1.0;
  if (moe_ep && out.model_flops_per_token > 0) {
    // CPU ranks that outnumber their machine's cores (cores known from a calibration) share them:
    // while the busiest rank computes its extra experts, the ranks waiting for it in the
    // all-to-all free their cores, so a layer's experts take max(machine's work / cores, busiest
    // rank alone) and only imbalance beyond the sharing costs time: gamma / sharing (1 on GPUs).
    const double sharing = cpu_sharing > 0 ? cpu_sharing : 1.0;
    gamma_compute = std::max(1.0, gamma / sharing);
    out.hardware_flops_per_token += (gamma_compute - 1.0) * expert_flops;
  }
  double peak = hw.peak_flops(q.training.precision);
  double efficiency = hw.efficiency;
  // A mixture of experts' expert blocks at the rate the calibration measured them at this ep and
  // split: at ep 1 every rank multiplies all E experts' few rows each (tens of rows per expert
  // on the bench model), at ep the ep x more rows of its E / ep experts, far faster per FLOP.
  std::optional<double> expert_rate;
  if (cal && expert_flops > 0)
    expert_rate = cal->expert_flops(q.training.precision, ranks_per_node, static_cast<int>(t * cp),
                                    std::max(1, sh.ep));
  if (cal) {
    // tp narrows every matmul of a layer and cp shortens its tokens: the rate of matmuls split
    // tp x cp ways (smaller matrices run slower on the same cores).
    if (std::optional<double> rate = cal->matmul_flops(q.training.precision, ranks_per_node, static_cast<int>(t * cp))) {
      peak = *rate;
      out.compute_calibrated = true;
      // The measured rate is what the matmuls already reach, so HardwareModel::efficiency (the
      // matmuls' fraction of the datasheet peak) must not scale it again: what is left is the
      // rest of the step (norms, softmax, element-wise ops, optimizer), the calibration's
      // step_efficiency, else kUnmeasuredStepEfficiency.
      efficiency = cal->step_efficiency > 0 ? cal->step_efficiency : kUnmeasuredStepEfficiency;
    }
  }
  // With pp stages, world / pp ranks share one stage's work, which is compute_share of the model:
  // the formula's world * peak becomes (world / pp) * peak, times the share.
  //   with an expert block's rate: the experts' gamma_compute x expert_flops at that rate, the
  //   rest at peak x efficiency.
  const double per_rank_tokens = out.tokens_per_step / static_cast<double>(world) * pp * part.compute_share;
  if (expert_rate && *expert_rate > 0 && out.compute_calibrated) {
    const double experts = gamma_compute * expert_flops;
    out.compute_s = per_rank_tokens * ((out.hardware_flops_per_token - experts) / (peak * efficiency) +
                                       experts / *expert_rate);
  } else {
    out.compute_s = per_rank_tokens * out.hardware_flops_per_token / (peak * efficiency);
  }
  // Learnt from past runs (core/run_fit.h): the term as the formula gives it is what the fit
  // compares with measurements; the prediction is the formula times the fitted factor.
  // Without one, the calibration's own step factors (Calibration::step_factors), on their own
  // link only: a factor measured inside a node says nothing of a group that crosses nodes.
  // Those count as calibrated, not fitted.
  const RunFit* fit = q.fit.get();
  // One term's formula seconds under `key`, recorded (term_s, term_key) and corrected in place
  // (a correction is factor x formula + per-step seconds, core/fit_key.h); `fitted` says
  // whether a fit of runs did it.
  auto correct = [&](const FitKey& key, double& seconds, bool& fitted) {
    const int ti = static_cast<int>(key.term);
    out.term_key[ti] = key;
    out.term_s[ti] = seconds;
    std::optional<TermCorrection> f;
    if (fit) f = fit->factor(key);
    else if (cal && !cal->step_factors.empty()) f = lookup_factor(cal->step_factors, key, /*any_link=*/false);
    if (!f) return;
    seconds = f->apply(seconds);
    fitted = fit != nullptr;
  };
  correct(FitKey{FitTerm::compute, LinkKind::intra_node, static_cast<int>(t), static_cast<int>(cp), q.training.precision,
                 moe_ep ? sh.ep : 1},
          out.compute_s, out.compute_fitted);

  // ---- Communication per axis ----
  // Every axis is a sum of collectives, each in the alpha-beta model (Hockney 1994):
  //   t = alpha + x / beta,  x = the bytes one rank sends (ring_bytes_sent, core/calibration.h),
  // so `count` collectives of one kind that send `bytes` in total take
  //   count * alpha + bytes / beta
  // whatever the sizes of the single collectives (the model is linear in x). alpha and beta
  // come from the calibration's fit for (link, op, group size) when it has one; otherwise from
  // HardwareModel: alpha = ring_steps(op, n) * latency_s (one latency per ring step) and
  // beta = the link's bandwidth.
  auto mesh = DeviceMesh::create(sh, ranks_per_node);
  auto crosses_nodes = [&](GroupKind kind) { return mesh.ok() && mesh->any_group_crosses_nodes(kind); };
  struct Term {
    Collective op;
    double count;  // collectives per step
    double bytes;  // bytes one rank sends in them, per step
  };
  // One term of an axis: collectives over groups of n ranks that cross nodes or not, corrected
  // under its FitKey and added to the axis (an axis may carry several terms: FSDP's dense part
  // and the experts' own, each with its factor).
  AxisArray<bool> charged{};
  auto charge = [&](Axis a, FitTerm term_kind, bool group_crosses, int64_t n, std::initializer_list<Term> terms,
                    int key_b = 1, int key_c = 1) {
    AxisComm& ax = out.comm[a];
    const LinkKind link = group_crosses ? LinkKind::inter_node : LinkKind::intra_node;
    const double bw = group_crosses ? hw.inter_node_bytes_per_s : hw.intra_node_bytes_per_s;
    bool all_calibrated = true;
    double seconds = 0, bytes = 0, collectives = 0;
    for (const Term& term : terms) {
      if (term.count <= 0) continue;
      std::optional<AlphaBeta> fit = cal ? cal->collective(link, term.op, n) : std::nullopt;
      const AlphaBeta ab = fit ? *fit : AlphaBeta{static_cast<double>(ring_steps(term.op, n)) * hw.latency_s, bw};
      all_calibrated = all_calibrated && fit.has_value();
      seconds += term.count * ab.latency_s + term.bytes / ab.bytes_per_s;
      bytes += term.bytes;
      collectives += term.count;
    }
    if (collectives <= 0) return;
    bool fitted = false;
    correct(FitKey{term_kind, link, static_cast<int>(n), key_b, Precision::fp32, key_c}, seconds, fitted);
    out.comm_calibrated[a] = (charged[a] ? out.comm_calibrated[a] : true) && all_calibrated;
    out.comm_fitted[a] = out.comm_fitted[a] || fitted;
    charged[a] = true;
    ax.crosses_nodes = ax.crosses_nodes || group_crosses;
    ax.seconds += seconds;
    ax.bytes += bytes;
    ax.collectives += static_cast<int>(std::lround(collectives));
  };
  const ParamLayout layout =
      stage_param_layout(tp_param_layout(m, t, q.trainer.vocab_parallel, sh.ep), part.layers, part.embedding, part.head);
  const double T = static_cast<double>(z.T);  // tokens per rank
  // Mixture of experts: the experts are FSDP-sharded over ne ranks (efsdp with ep > 1, else n).
  const int64_t ne = layout.sparse_layers > 0 ? layout.expert_shards(n_fsdp) : n_fsdp;
  const bool fsdp = n_fsdp > 1 || ne > 1;
  const double L_sparse = static_cast<double>(layout.sparse_layers);
  const double root_modules = layout.root.empty() ? 0.0 : 1.0;
  const double h = static_cast<double>(m.hidden_size);

  // tp (Megatron with sequence parallelism): per layer, forward all-gathers the norm output
  // before attention and before the MLP and reduce-scatters both block outputs; backward does
  // the mirror image (the gradient of an all-gather is a reduce-scatter and back). Each moves
  // M = T * h * c bytes (the full micro-batch activation): 4 all-gathers + 4 reduce-scatters,
  // 8 (t-1)/t M per layer per micro-batch (without SP: 4 all-reduces, the same bytes); full
  // checkpointing adds the recomputed forward's 2 + 2. Vocab-parallel embedding and lm_head add
  // one collective each way (2 all-gathers + 2 reduce-scatters, 4 (t-1)/t M) and the parallel
  // cross-entropy three all-reduces of T floats (max, sum of exp, target logit).
  if (t > 1) {
    const double M = T * h * c;
    // Mixture of experts: after the step's last backward meshtrain sums over tp, in one all-reduce
    // per unit, the fp32 gradients of what every tp rank holds whole but computes from its own
    // rows (TensorParallel::finish_gradients): under sequence parallelism the norms, the q/k norms,
    // the router and, with ep = 1, the experts (each tp rank routes its own sequence shard through
    // whole experts); with t > kv heads the copied k/v heads (a [kv, len] buffer). With ep > 1 the
    // experts are this ep rank's alone and FSDP reduce-scatters them over efsdp: nothing over tp.
    // Each rank reduces the partial ranges of its FSDP shard, 1/n of them.
    const double partial = moe_tp_partial_grad_numel(m, layout, q.training.sequence_parallel, sh.ep, L, L_sparse,
                                                     part.head);
    const double partial_bytes = 4.0 * partial / static_cast<double>(n_fsdp);
    const double partial_units = partial > 0 ? L + (part.head && q.training.sequence_parallel ? 1 : 0) : 0;
    // (A pipeline stage has the embedding's pair only on the first stage, the head's and the
    // cross-entropy's on the last.)
    const double ends = (part.embedding ? 1 : 0) + (part.head ? 1 : 0);
    const double ce = part.head ? 3 : 0;
    // With ep > 1 a sparse layer's MoE keeps its tp ranks' sequence shards (they route their own
    // tokens, torchtitan's TP2EP): only attention's pair of collectives each way remains.
    const double per_layer = full_ac ? 6 : 4;
    const double per_mb_half = L * per_layer - (moe_ep ? L_sparse * per_layer / 2 : 0) + ends;  // all-gathers = reduce-scatters
    charge(Axis::tp, FitTerm::tp, crosses_nodes(GroupKind::tp), t,
           {{Collective::all_gather, ga * per_mb_half, ga * per_mb_half * ring_bytes_sent(Collective::all_gather, M, t)},
            {Collective::reduce_scatter, ga * per_mb_half,
             ga * per_mb_half * ring_bytes_sent(Collective::reduce_scatter, M, t)},
            {Collective::all_reduce, ga * ce, ga * ce * ring_bytes_sent(Collective::all_reduce, T * 4, t)},
            {Collective::all_reduce, partial_units, ring_bytes_sent(Collective::all_reduce, partial_bytes, t)}},
           static_cast<int>(cp), static_cast<int>(sh[Axis::dp_shard]));
  }

  // cp (ring attention): cp-1 ring steps per layer; forward passes the local k and v block
  // (T * kv * c each) to the next rank, backward passes k, v and their gradients (4 blocks).
  // Point-to-point: every rank sends and receives at once, so time = sent bytes / bandwidth,
  // one send/recv per ring step forward (two under full checkpointing) and one backward.
  if (cp > 1) {
    const double kv = static_cast<double>(layout.kv_heads_per_rank * m.head_dim);
    const double block = T * kv * c;
    const double blocks_per_step = (full_ac ? 4 : 2) + 4;
    const double bytes = ga * L * static_cast<double>(cp - 1) * blocks_per_step * block;
    const double count = ga * L * (full_ac ? 3 : 2) * static_cast<double>(cp - 1);
    charge(Axis::cp, FitTerm::cp_ring, crosses_nodes(GroupKind::cp), cp, {{Collective::send_recv, count, bytes}});
  }

  // FSDP over dp_shard x cp (charged to dp_shard, split with cp at the end): every micro-batch
  // all-gathers the parameters in the compute dtype for forward and again for backward
  // (reshard after forward), one
  // collective per module (the layers and the root); the fp32 gradients are reduce-scattered
  // every micro-batch, or once per step with fsdp_grad_sync = step (no sync on
  // accumulation micro-batches).
  // Mixture of experts: the experts' share E of the parameters goes over the efsdp group (ne
  // ranks) instead. With ep = 1 it rides in the same collectives; with ep > 1 a sparse block's
  // experts are a flat parameter of their own, gathered and reduce-scattered in collectives of
  // their own over efsdp, on efsdp's link (its groups cross nodes where the dense ones may not:
  // efsdp strides over the ranks ep borrows): a term of their own (FitTerm::expert_fsdp), and
  // the dense part's only where n > 1. Both are charged to dp_shard, as meshtrain charges them.
  if (fsdp) {
    const double E = static_cast<double>(layout.expert_numel());
    const double P = static_cast<double>(layout.total_numel()) - E;
    const double reductions = q.training.fsdp_grad_sync == FsdpGradSync::step ? 1.0 : ga;
    const double modules = L + root_modules;
    const bool dense_crosses = crosses_nodes(GroupKind::dp_shard_cp);
    if (moe_ep && L_sparse > 0) {
      if (n_fsdp > 1)
        charge(Axis::dp_shard, FitTerm::fsdp, dense_crosses, n_fsdp,
               {{Collective::all_gather, ga * 2 * modules, ga * 2 * ring_bytes_sent(Collective::all_gather, P * c, n_fsdp)},
                {Collective::reduce_scatter, reductions * modules,
                 reductions * ring_bytes_sent(Collective::reduce_scatter, P * 4, n_fsdp)}});
      if (ne > 1)
        charge(Axis::dp_shard, FitTerm::expert_fsdp,
               mesh.ok() && mesh->any_expert_group_crosses_nodes(ExpertGroupKind::efsdp), ne,
               {{Collective::all_gather, ga * 2 * L_sparse, ga * 2 * ring_bytes_sent(Collective::all_gather, E * c, ne)},
                {Collective::reduce_scatter, reductions * L_sparse,
                 reductions * ring_bytes_sent(Collective::reduce_scatter, E * 4, ne)}});
    } else {
      auto gathered = [&](Collective op, double bytes_per_param) {
        return ring_bytes_sent(op, P * bytes_per_param, n_fsdp) + ring_bytes_sent(op, E * bytes_per_param, ne);
      };
      charge(Axis::dp_shard, FitTerm::fsdp, dense_crosses, std::max(n_fsdp, ne),
             {{Collective::all_gather, ga * 2 * modules, ga * 2 * gathered(Collective::all_gather, c)},
              {Collective::reduce_scatter, reductions * modules, reductions * gathered(Collective::reduce_scatter, 4)}});
    }
  }

  // ep (mixture of experts): every sparse layer dispatches its token copies to the experts'
  // ranks and combines them back, two all-to-alls forward and two backward (three forward under
  // full checkpointing, whose recompute dispatches again). One all-to-all sends the copies bound
  // for the other ep - 1 ranks: (ep - 1) / ep x R x h x c bytes, R = top-k x T_e x imbalance
  // routed copies (T_e = T / t: the tp ranks route their own sequence shards; the imbalance of
  // whatever carries them, gamma_a2a below). A pairwise
  // exchange: alpha = (ep - 1) latencies, beta = the link of the ep group (inter-node when a
  // group spans nodes), or the calibration's all-to-all fit for that link and group size when
  // it has one (meshtrain calibrate times the same all-to-all over equal blocks). Before the
  // rows, each forward (the recompute too) exchanges the rows' counts: one all-to-all of E int64
  // counts (E / ep to each member), so that each rank knows what it receives.
  if (moe_ep && L_sparse > 0) {
    const double ep = static_cast<double>(sh.ep);
    const double T_e = std::max(1.0, T / static_cast<double>(t));
    AxisComm& ax = out.comm_ep;
    ax.crosses_nodes = mesh.ok() && mesh->any_expert_group_crosses_nodes(ExpertGroupKind::ep);
    // On GPUs every rank's own link carries its copies: the busiest receiver's gamma. CPU ranks
    // share their machine's cores (which copy the bytes) and, across nodes, the node's link: the
    // busiest node's copies (moe_node_imbalance; none inside a node), and the busiest rank only
    // beyond the sharing, as for compute.
    const double gamma_a2a =
        cpu_sharing > 0 ? std::max({1.0, ax.crosses_nodes ? q.moe_node_imbalance : 1.0, gamma / cpu_sharing}) : gamma;
    const double R = static_cast<double>(m.moe.experts_per_token) * T_e * gamma_a2a;
    const double rows = ga * L_sparse * (full_ac ? 6 : 4);
    const double counts = ga * L_sparse * (full_ac ? 2 : 1);
    const double count = rows + counts;
    const double bytes = (ep - 1) / ep * (rows * R * h * c + counts * 8.0 * static_cast<double>(m.moe.num_experts));
    const LinkKind link = ax.crosses_nodes ? LinkKind::inter_node : LinkKind::intra_node;
    const std::optional<AlphaBeta> fit_a2a = cal ? cal->collective(link, Collective::all_to_all, sh.ep) : std::nullopt;
    const AlphaBeta ab = fit_a2a ? *fit_a2a
                                 : AlphaBeta{(ep - 1) * hw.latency_s, ax.crosses_nodes ? hw.inter_node_bytes_per_s
                                                                                       : hw.intra_node_bytes_per_s};
    ax.seconds = count * ab.latency_s + bytes / ab.bytes_per_s;
    out.comm_ep_calibrated = fit_a2a.has_value();
    // What an all-to-all costs inside a step against the same exchange timed alone (ranks that
    // reach it apart, the copies' packing): the calibration's ep split steps or the runs' fit.
    correct(FitKey{FitTerm::ep, link, sh.ep, 1}, ax.seconds, out.comm_ep_fitted);
    ax.bytes = bytes;
    ax.collectives = static_cast<int>(std::lround(count));
  }

  // dp_replicate: one all-reduce of the fp32 gradients per step: of the FSDP shard under HSDP
  // (one per module), of the whole tp shard under DDP (in 25 MiB buckets).
  if (r > 1) {
    const double G = 4.0 * static_cast<double>(fsdp ? layout.sharded_total_numel(n_fsdp)
                                                    : layout.total_numel());
    const double count = fsdp ? L + root_modules : std::max(1.0, std::ceil(G / (25 << 20)));
    charge(Axis::dp_replicate, FitTerm::dp_replicate, crosses_nodes(GroupKind::dp_replicate), r,
           {{Collective::all_reduce, count, ring_bytes_sent(Collective::all_reduce, G, r)}},
           fsdp ? kHsdpAllReduce : kDdpAllReduce);
  }

  for (const auto& ax : out.comm) out.comm_s += ax.seconds;
  out.comm_s += out.comm_ep.seconds;
  // Overlap: each axis may hide up to overlap[axis] x compute of its time, out of one shared
  // compute budget (a rank computes once, whatever it waits on), dp_shard first.
  double budget = out.compute_s;
  for (Axis a : {Axis::dp_shard, Axis::dp_replicate, Axis::cp, Axis::tp}) {
    const double frac = std::clamp(hw.overlap[a], 0.0, 1.0);
    const double hidden = std::min({out.comm[a].seconds, frac * out.compute_s, budget});
    budget -= hidden;
    out.hidden_comm_s += hidden;
    out.comm[a].hidden_s = hidden;
  }
  // After the overlap (which treats FSDP traffic as FSDP, whichever axes it crosses): the FSDP
  // group is dp_shard x cp, so charge its time to both axes as meshtrain's metrics do
  // (docs/metrics.md), in proportion to (size - 1), the peers a ring member has along each:
  // predicted and measured comm_s then compare axis by axis.
  const double ds = static_cast<double>(sh[Axis::dp_shard] - 1), dc = static_cast<double>(cp - 1);
  if (n_fsdp > 1 && dc > 0) {
    AxisComm& from = out.comm[Axis::dp_shard];
    AxisComm& to = out.comm[Axis::cp];
    const double share = dc / (ds + dc);
    to.seconds += share * from.seconds;
    to.hidden_s += share * from.hidden_s;
    from.hidden_s -= share * from.hidden_s;
    to.bytes += share * from.bytes;
    to.crosses_nodes = to.crosses_nodes || from.crosses_nodes;
    from.seconds -= share * from.seconds;
    from.bytes -= share * from.bytes;
    if (ds == 0) {
      to.collectives += from.collectives;
      from.collectives = 0;
    }
    if (!out.comm_calibrated[Axis::dp_shard]) out.comm_calibrated[Axis::cp] = false;
    if (!out.comm_fitted[Axis::dp_shard]) out.comm_fitted[Axis::cp] = false;
  }
  out.step_s = out.compute_s + out.comm_s - out.hidden_comm_s;
  out.tokens_per_s = out.step_s > 0 ? out.tokens_per_step / out.step_s : 0;
  out.mfu = out.model_flops_per_token * out.tokens_per_s / (static_cast<double>(world) * peak);
  out.peak_flops_used = peak;
  // A prediction is no closer to a run than the cluster is to itself (the calibration's drift
  // and spread), nor than the fit was to the runs it learnt from (its median residual).
  bool calibrated = out.compute_calibrated, fitted = out.compute_fitted;
  for (Axis a : kAxes) {
    calibrated = calibrated || out.comm_calibrated[a] || out.comm_ep_calibrated;
    fitted = fitted || out.comm_fitted[a];
  }
  if (cal && calibrated) out.step_band = cal->step_band();
  if (fit && fitted) out.step_band = std::max(out.step_band, fit->median_residual);
  return out;
}

}  // namespace

// ---- Pipeline ----
// Each stage's own step (estimate_stage: its layers, its share of the compute, its collectives)
// is the work it does on the M micro-batches. Spread over its chunks by their cost and over the
// micro-batches, one forward takes 1/3 of a chunk-micro-batch (2 of the 6 FLOPs per parameter;
// 1/4 under full checkpointing, whose backward recomputes the forward), the backward the rest.
// The stages' orders (core/pipeline_schedule.h) then run on a timeline, with one hop per send:
// an activation of T h / t_sp elements in the compute dtype, at the pp link's alpha-beta. What
// the slowest stage does not compute in that step is its pp time (the bubble and the hops), so
// step = its compute + its collectives - hidden + pp, as for every other axis. dp_replicate's
// once-per-step all-reduce (what the overlap leaves exposed) runs after the pipeline drains.
TimeEstimate estimate_time(const TimeQuery& q) {
  const ModelSpec& m = q.model;
  const int pp = std::max(1, q.shape[Axis::pp]);
  if (pp == 1) {
    StagePart whole;
    whole.layers = m.num_hidden_layers;
    return estimate_stage(q, whole);
  }
  const int v = q.training.pp_schedule == PipelineSchedule::interleaved_1f1b ? std::max(1, q.training.pp_virtual_stages) : 1;
  const std::vector<PipelineChunk> chunks = pipeline_cut(m, q.training.seq_len, pp, v);
  double total_cost = 0;
  for (const PipelineChunk& c : chunks) total_cost += c.cost;
  std::vector<StagePart> parts(static_cast<size_t>(pp));
  std::vector<double> stage_cost(static_cast<size_t>(pp), 0.0);
  for (StagePart& p : parts) p.embedding = p.head = false;
  for (const PipelineChunk& c : chunks) {
    StagePart& p = parts[static_cast<size_t>(c.rank)];
    p.layers += c.num_layers;
    p.embedding = p.embedding || c.embedding;
    p.head = p.head || c.head;
    stage_cost[static_cast<size_t>(c.rank)] += c.cost;
  }
  std::vector<TimeEstimate> stages;
  std::vector<double> pipelined(static_cast<size_t>(pp)), tail(static_cast<size_t>(pp));
  size_t worst = 0;
  for (int r = 0; r < pp; ++r) {
    StagePart& p = parts[static_cast<size_t>(r)];
    p.compute_share = total_cost > 0 ? stage_cost[static_cast<size_t>(r)] / total_cost : 1.0 / pp;
    stages.push_back(estimate_stage(q, p));
    const TimeEstimate& e = stages.back();
    tail[static_cast<size_t>(r)] =
        e.comm[Axis::dp_replicate].seconds * (1.0 - std::clamp(q.hardware.overlap[Axis::dp_replicate], 0.0, 1.0));
    pipelined[static_cast<size_t>(r)] = std::max(0.0, e.step_s - tail[static_cast<size_t>(r)]);
    if (e.step_s > stages[worst].step_s) worst = static_cast<size_t>(r);
  }
  const int64_t micro_batches = stages.front().grad_accum_steps;
  const double fwd_share = q.training.activation_checkpointing == ActivationCheckpointing::full ? 0.25 : 1.0 / 3.0;
  std::vector<double> forward_s, backward_s;
  for (const PipelineChunk& c : chunks) {
    const size_t r = static_cast<size_t>(c.rank);
    const double share = stage_cost[r] > 0 ? c.cost / stage_cost[r] : 1.0 / v;
    const double per_mb = pipelined[r] * share / static_cast<double>(micro_batches);
    forward_s.push_back(fwd_share * per_mb);
    backward_s.push_back((1 - fwd_share) * per_mb);
  }

  // The hop: one activation (or its gradient) to the neighbour stage.
  const RankSizes z = rank_sizes(q.shape, q.training.micro_batch, q.training.seq_len, q.training.precision);
  const int64_t t_sp = q.training.sequence_parallel && z.t > 1 ? z.t : 1;
  const double hop_bytes = static_cast<double>(z.T) * static_cast<double>(m.hidden_size) *
                           static_cast<double>(z.c) / static_cast<double>(t_sp);
  const int ranks_per_node = q.gpus_per_node > 0 ? q.gpus_per_node : static_cast<int>(q.shape.world_size());
  auto mesh = DeviceMesh::create(q.shape, ranks_per_node);
  const bool crosses = mesh.ok() && mesh->any_group_crosses_nodes(GroupKind::pp);
  const LinkKind link = crosses ? LinkKind::inter_node : LinkKind::intra_node;
  std::optional<AlphaBeta> fit =
      q.calibration ? q.calibration->collective(link, Collective::send_recv, 2) : std::nullopt;
  const AlphaBeta ab = fit ? *fit
                           : AlphaBeta{q.hardware.latency_s, crosses ? q.hardware.inter_node_bytes_per_s
                                                                     : q.hardware.intra_node_bytes_per_s};
  const double hop_s = ab.latency_s + hop_bytes / ab.bytes_per_s;

  TimeEstimate out = stages[worst];
  auto timeline = simulate_pipeline(q.training.pp_schedule, pp, v, micro_batches, forward_s, backward_s, hop_s);
  const double tail_s = *std::max_element(tail.begin(), tail.end());
  const double step = (timeline ? timeline->step_s : pipelined[worst] * (micro_batches + pp - 1.0) / micro_batches) + tail_s;
  out.pp_bubble_fraction = timeline ? timeline->bubble_fraction : pipeline_bubble_fraction(q.training.pp_schedule, pp, v, micro_batches);
  AxisComm& ax = out.comm[Axis::pp];
  ax.seconds = std::max(0.0, step - out.step_s);
  ax.crosses_nodes = crosses;
  ax.collectives = static_cast<int>(2 * micro_batches * v);  // sends of a middle stage
  ax.bytes = 2.0 * static_cast<double>(micro_batches * v) * hop_bytes;
  out.comm_calibrated[Axis::pp] = fit.has_value();
  out.comm_s += ax.seconds;
  out.step_s = out.compute_s + out.comm_s - out.hidden_comm_s;
  out.tokens_per_s = out.step_s > 0 ? out.tokens_per_step / out.step_s : 0;
  out.mfu = out.model_flops_per_token * out.tokens_per_s /
            (static_cast<double>(q.shape.world_size()) * out.peak_flops_used);
  return out;
}

}  // namespace meshwork
