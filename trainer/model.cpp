#include "trainer/model.h"

#include <cmath>

#include <torch/torch.h>

#include "core/rope.h"
#include "trainer/flight_recorder.h"
#include "trainer/fused_ops.h"

namespace meshwork::trainer {

int64_t ParamInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t UnitLayout::numel() const {
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  return n;
}

int64_t UnitLayout::offset(size_t i) const {
  int64_t n = 0;
  for (size_t j = 0; j < i; ++j) n += params[j].numel();
  return n;
}

int UnitLayout::index(const std::string& name) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

using at::Tensor;

// Block parameter order; views() returns them in this order. After kMlpNorm come the MLP's
// parameters (dense: kGate, kUp, kDown; sparse: router and three stacked expert tensors), then
// the q/k/v biases and the q/k norms where the family has them.
enum BlockParam { kAttnNorm, kWq, kWk, kWv, kWo, kMlpNorm, kGate, kUp, kDown };
enum RootParam { kEmbed, kNorm, kHead };

Tensor rms_norm(const Tensor& x, const Tensor& w, double eps) {
  // y = x / sqrt(mean(x^2) + eps) * w, computed in fp32 as Llama does, then cast back.
  // fp32 on CPU: one fused kernel each way (trainer/fused_ops.h); the same maths.
  if (fused_ops_apply(x) && fused_ops_apply(w)) return fused_rms_norm(x, w, eps);
  // (fp64 stays fp64: the gradient checks of tests/trainer run the model in fp64.)
  Tensor xf = x.scalar_type() == at::kDouble ? x : x.to(at::kFloat);
  Tensor y = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return y.to(x.scalar_type()) * w;
}

Tensor rotate_half(const Tensor& x) {
  auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// HF Llama RoPE: for head dim D, inv_freq_i = theta^(-2i/D), i < D/2 (rewritten by a llama3
// rope scaling: core/rope.h); angle = pos * inv_freq, duplicated to D (cat(freqs, freqs)),
// x' = x cos + rotate_half(x) sin.
std::pair<Tensor, Tensor> rope_tables(const Tensor& positions, const ModelSpec& spec, at::ScalarType dtype) {
  const std::vector<double> inv = rope_inverse_frequencies(spec);
  std::vector<float> inv_f(inv.begin(), inv.end());  // fp32, as HF's inv_freq buffer
  Tensor inv_freq = at::tensor(inv_f, at::kFloat).to(positions.device());
  Tensor angles = at::outer(positions.to(at::kFloat), inv_freq);
  Tensor emb = at::cat({angles, angles}, -1);  // [T, D]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

Tensor default_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  // Grouped-query attention: each kv head serves Hq / Hkv query heads. fp32 on CPU: exact
  // tiles with BLAS calls (trainer/attention_kernels.h), 1.4-1.5x faster than flash attention there.
  if (fused_attention_applies(q, k, v)) return fused_causal_attention(q, k, v);
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt,
                                         /*enable_gqa=*/k.size(1) != q.size(1));
}

// x w^T (+ bias): at::linear, on meshtrain's own GEMM for fp32 on CPU (trainer/fused_ops.h: faster than MKL
// for these shapes, bench note in docs/trainer.md).
Tensor project(const Tensor& x, const Tensor& w, const Tensor& bias = {}) {
  if (!bias.defined() && fused_linear_applies(x, w)) return fused_linear(x, w);
  return at::linear(x, w, bias);
}

Tensor default_head_loss_sum(const Tensor& h, const Tensor& head, const Tensor& targets) {
  Tensor logits = project(h, head);
  if (logits.scalar_type() != at::kDouble) logits = logits.to(at::kFloat);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape(-1), {},
                                at::Reduction::Sum);
}

// Recomputes a block in backward instead of keeping its activations (full activation
// checkpointing, torch.utils.checkpoint's reentrant variant): forward runs without a graph and
// keeps only the block input; backward acquires the weights again, reruns the block with a graph
// and backpropagates through it, which also accumulates the weight gradients.
struct CheckpointedBlock : public torch::autograd::Function<CheckpointedBlock> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& cos,
                        const Tensor& sin, int64_t layer, const Model* model,
                        WeightSource* weights) {
    ctx->save_for_backward({x, cos, sin});
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["weights"] = reinterpret_cast<int64_t>(weights);
    ctx->saved_data["flight"] = reinterpret_cast<int64_t>(thread_flight());
    // A sparse layer's rerun reads this forward call's record, not the model's current one:
    // under pipeline stages other micro-batches have routed since.
    if (model->spec().is_moe()) {
      ctx->saved_data["counts"] = model->routing().counts;
      ctx->saved_data["grad_scale"] = model->routing().grad_scale;
      ctx->saved_data["aux_in_objective"] = model->routing().aux_in_objective;
    }
    const int unit = Model::block_unit(static_cast<int>(layer));
    Tensor flat = weights->acquire(unit);
    Tensor y = model->block_forward(static_cast<int>(layer), flat, x, cos, sin);
    return weights->release(unit, y);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const int layer = static_cast<int>(ctx->saved_data["layer"].toInt());
    auto* model = reinterpret_cast<const Model*>(ctx->saved_data["model"].toInt());
    auto* weights = reinterpret_cast<WeightSource*>(ctx->saved_data["weights"].toInt());
    if (auto* flight = reinterpret_cast<FlightRecorder*>(ctx->saved_data["flight"].toInt()))
      flight->phase(FlightPhase::backward, layer);
    Tensor x = saved[0].detach().requires_grad_(true);
    {
      at::AutoGradMode grad(true);
      // The rerun routes again but records nothing (its picks were counted in forward).
      MoeForwardState rerun;
      if (model->spec().is_moe()) {
        rerun.counts = ctx->saved_data["counts"].toTensor();
        rerun.grad_scale = ctx->saved_data["grad_scale"].toTensor();
        rerun.aux_in_objective = ctx->saved_data["aux_in_objective"].toBool();
      }
      Tensor flat = weights->acquire(Model::block_unit(layer));
      Tensor y = model->block_forward(layer, flat, x, saved[1], saved[2], &rerun);
      torch::autograd::backward({y}, {grads[0]});
    }
    return {x.grad(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Model::Model(ModelSpec spec) : spec_(std::move(spec)) {
  const int64_t H = spec_.hidden_size, I = spec_.intermediate_size, D = spec_.head_dim;
  const int64_t Hq = spec_.num_attention_heads, Hkv = spec_.num_key_value_heads;
  const int64_t V = spec_.vocab_size, L = spec_.num_hidden_layers;
  // GPT-2 / Megatron init: N(0, 0.02), the residual output projections scaled by 1/sqrt(2L) so
  // the residual stream's variance does not grow with depth; norm weights start at one.
  const double std = 0.02, out_std = 0.02 / std::sqrt(2.0 * static_cast<double>(L));
  UnitLayout root;
  root.params.push_back({"embed", {V, H}, std});
  root.params.push_back({"norm", {H}, 0});
  if (!spec_.tie_word_embeddings) root.params.push_back({"head", {V, H}, std});
  full_layouts_.push_back(root);
  const int64_t E = spec_.moe.num_experts, Ie = spec_.moe.expert_intermediate_size;
  for (int64_t l = 0; l < L; ++l) {
    // Order: attention, mlp_norm, the MLP (dense: w_gate, w_up, w_down; sparse: router and the
    // experts stacked [E, ...]), the q/k/v biases, the q/k norms; block_forward reads it so.
    UnitLayout b;
    b.params = {{"attn_norm", {H}, 0},   {"wq", {Hq * D, H}, std},  {"wk", {Hkv * D, H}, std},
                {"wv", {Hkv * D, H}, std}, {"wo", {H, Hq * D}, out_std}, {"mlp_norm", {H}, 0}};
    if (spec_.layer_is_sparse(l)) {
      sparse_slot_.push_back(static_cast<int>(moe_stats_.layers.size()));
      moe_stats_.layers.push_back(static_cast<int>(l));
      b.params.push_back({"router", {E, H}, std});
      b.params.push_back({"expert_gate", {E, Ie, H}, std});
      b.params.push_back({"expert_up", {E, Ie, H}, std});
      b.params.push_back({"expert_down", {E, H, Ie}, out_std});
    } else {
      sparse_slot_.push_back(-1);
      b.params.push_back({"w_gate", {I, H}, std});
      b.params.push_back({"w_up", {I, H}, std});
      b.params.push_back({"w_down", {H, I}, out_std});
    }
    if (spec_.attention_bias) {
      b.params.push_back({"bq", {Hq * D}, 0});
      b.params.push_back({"bk", {Hkv * D}, 0});
      b.params.push_back({"bv", {Hkv * D}, 0});
    }
    if (spec_.qk_norm != QkNorm::none) {
      const bool whole = spec_.qk_norm == QkNorm::whole_projection;
      b.params.push_back({"q_norm", {whole ? Hq * D : D}, 0});
      b.params.push_back({"k_norm", {whole ? Hkv * D : D}, 0});
    }
    full_layouts_.push_back(b);
  }
  moe_stats_.reset(spec_);
  layouts_ = full_layouts_;
  drawn_root_ = root;
  for (int i = 0; i < static_cast<int>(root.params.size()); ++i) root_kept_.push_back(i);
  root_head_ = spec_.tie_word_embeddings ? -1 : kHead;
  held_.assign(full_layouts_.size(), true);
  ops_.attention = default_attention;
  ops_.enter_column = [](const Tensor& x) { return x; };
  ops_.exit_row = [](const Tensor& x) { return x; };
  ops_.embed = [](const Tensor& w, const Tensor& tokens) { return at::embedding(w, tokens); };
  ops_.head_loss_sum = default_head_loss_sum;
}

void Model::keep_chunks(const std::vector<PipelineChunk>& chunks) {
  pipelined_ = true;
  held_.assign(full_layouts_.size(), false);
  bool embedding = false, head = false;
  for (const PipelineChunk& c : chunks) {
    for (int l = c.first_layer; l < c.first_layer + c.num_layers; ++l) held_[block_unit(l)] = true;
    embedding = embedding || c.embedding;
    head = head || c.head;
  }
  held_[0] = embedding || head;
  root_kept_.clear();
  UnitLayout root;
  root_embed_ = root_norm_ = root_head_ = -1;
  auto keep = [&](int drawn_index, int& slot) {
    slot = static_cast<int>(root.params.size());
    root.params.push_back(drawn_root_.params[drawn_index]);
    root_kept_.push_back(drawn_index);
  };
  // A tied head reads the embedding (core's validation keeps pp = 1 for tied models, where one
  // chunk holds both ends).
  if (embedding || (head && spec_.tie_word_embeddings)) keep(kEmbed, root_embed_);
  if (head) keep(kNorm, root_norm_);
  if (head && !spec_.tie_word_embeddings) keep(kHead, root_head_);
  full_layouts_[0] = root;
  layouts_[0] = root;
}

std::vector<int> Model::chunk_units(const PipelineChunk& chunk) {
  std::vector<int> units;
  if (chunk.embedding || chunk.head) units.push_back(0);
  for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) units.push_back(block_unit(l));
  return units;
}

PipelineChunk Model::whole() const {
  PipelineChunk c;
  c.first_layer = 0;
  c.num_layers = num_layers();
  c.embedding = c.head = true;
  return c;
}

at::Tensor Model::init_unit(int unit, uint64_t seed) const {
  // One generator per unit: seed mixed with the unit index (splitmix64 constant), so unit u's
  // numbers do not depend on which other units a rank builds.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ (0x9E3779B97F4A7C15ull * (unit + 1)));
  // The root is drawn whole, then cut to what this stage keeps (keep_chunks).
  const UnitLayout& lay = unit == 0 ? drawn_root_ : full_layouts_[unit];
  Tensor flat = at::empty({lay.numel()}, at::kFloat);
  for (size_t i = 0; i < lay.params.size(); ++i) {
    const ParamInfo& p = lay.params[i];
    Tensor v = flat.narrow(0, lay.offset(i), p.numel());
    if (p.init_std == 0) {
      // Norm weights start at one; attention biases (Qwen2) at zero.
      v.fill_(p.name.rfind("b", 0) == 0 ? 0.0 : 1.0);
    } else {
      v.normal_(0.0, p.init_std, gen);
    }
  }
  if (unit == 0 && root_kept_.size() != drawn_root_.params.size()) {
    std::vector<Tensor> kept;
    for (int i : root_kept_) kept.push_back(flat.narrow(0, lay.offset(i), lay.params[i].numel()));
    return kept.empty() ? at::empty({0}, at::kFloat) : at::cat(kept);
  }
  return flat;
}

std::vector<at::Tensor> Model::views(int unit, const at::Tensor& flat) const {
  const UnitLayout& lay = layouts_[unit];
  TORCH_CHECK(flat.numel() == lay.numel(), "unit ", unit, ": flat weights have ", flat.numel(),
              " elements, the layout needs ", lay.numel());
  // split_with_sizes, not one narrow per parameter: its backward concatenates the pieces'
  // gradients into one flat gradient (one allocation), where each narrow's backward would
  // allocate a zero tensor of the whole unit.
  std::vector<int64_t> sizes;
  for (const auto& p : lay.params) sizes.push_back(p.numel());
  auto pieces = flat.split_with_sizes(sizes);
  std::vector<Tensor> out;
  for (size_t i = 0; i < pieces.size(); ++i) out.push_back(pieces[i].view(lay.params[i].shape));
  return out;
}

at::Tensor Model::block_forward(int layer, const at::Tensor& flat, const at::Tensor& x, const at::Tensor& cos,
                                const at::Tensor& sin, MoeForwardState* routing) const {
  const UnitLayout& lay = layouts_[block_unit(layer)];
  TORCH_CHECK(flat.numel() == lay.numel(), "block ", layer, ": flat weights have ", flat.numel(),
              " elements, the layout needs ", lay.numel());
  const int64_t B = x.size(0), D = spec_.head_dim;
  const bool bias = spec_.attention_bias, qk_norm = spec_.qk_norm != QkNorm::none;
  const int slot = sparse_slot_[layer];
  const int mlp_params = slot >= 0 ? 4 : 3;
  const int bias_at = kMlpNorm + 1 + mlp_params, qk_norm_at = bias_at + (bias ? 3 : 0);
  // wq, wk, wv (and w_gate, w_up; bq, bk, bv) are adjacent in the flat unit: split it into
  // groups so that one matmul does the three projections (fewer, larger GEMMs). Split (not
  // narrow) for the same reason as views(). Gate and up are one GEMM only for the fused CPU
  // SwiGLU: elsewhere (CUDA, bf16) they stay two, so that silu and the product run on contiguous
  // tensors (ATen's vectorized kernels) instead of the strided halves of one [.., 2I] output,
  // which took 2-3x longer (the H200 profile in docs/trainer.md, "On a GPU").
  const bool fused_swiglu_input = fused_ops_apply(x);
  auto n = [&](int i) { return lay.params[i].numel(); };
  std::vector<int64_t> sizes = {n(kAttnNorm), n(kWq) + n(kWk) + n(kWv), n(kWo), n(kMlpNorm)};
  if (slot >= 0) {
    for (int i = 0; i < 4; ++i) sizes.push_back(n(kGate + i));  // router, expert gate/up/down
  } else if (fused_swiglu_input) {
    sizes.push_back(n(kGate) + n(kUp));
    sizes.push_back(n(kDown));
  } else {
    sizes.push_back(n(kGate));
    sizes.push_back(n(kUp));
    sizes.push_back(n(kDown));
  }
  const size_t bias_part = sizes.size();
  if (bias) sizes.push_back(n(bias_at) + n(bias_at + 1) + n(bias_at + 2));
  const size_t qk_norm_part = sizes.size();
  if (qk_norm) {
    sizes.push_back(n(qk_norm_at));
    sizes.push_back(n(qk_norm_at + 1));
  }
  auto part = flat.split_with_sizes(sizes);
  const int64_t h_in = lay.params[kWq].shape[1];
  const int64_t hq = lay.params[kWq].shape[0] / D, hkv = lay.params[kWk].shape[0] / D;
  Tensor attn_norm = part[0], wqkv = part[1].view({-1, h_in});
  Tensor wo = part[2].view(lay.params[kWo].shape), mlp_norm = part[3];
  Tensor bqkv = bias ? part[bias_part] : Tensor();
  // Attention. Head counts come from the (possibly column-split) layout.
  Tensor h = ops_.enter_column(rms_norm(x, attn_norm, spec_.rms_norm_eps));
  // Sequence length after the column region's entry: under sequence parallelism x holds a
  // sequence shard and enter_column gathers the whole (cp-local) sequence.
  const int64_t T = h.size(1);
  auto qkv = project(h, wqkv, bqkv).split_with_sizes({hq * D, hkv * D, hkv * D}, -1);
  Tensor q_rows = qkv[0], k_rows = qkv[1];
  // OLMoE normalises the whole q and k projections (before the split into heads).
  if (spec_.qk_norm == QkNorm::whole_projection) {
    q_rows = rms_norm(q_rows, part[qk_norm_part], spec_.rms_norm_eps);
    k_rows = rms_norm(k_rows, part[qk_norm_part + 1], spec_.rms_norm_eps);
  }
  Tensor q = q_rows.view({B, T, hq, D});
  Tensor k = k_rows.reshape({B, T, hkv, D});
  // Qwen3 normalises each head's head_dim with one weight shared by the heads.
  if (spec_.qk_norm == QkNorm::per_head) {
    q = rms_norm(q, part[qk_norm_part], spec_.rms_norm_eps);
    k = rms_norm(k, part[qk_norm_part + 1], spec_.rms_norm_eps);
  }
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  Tensor v = qkv[2].view({B, T, hkv, D}).transpose(1, 2);
  if (fused_ops_apply(q) && fused_ops_apply(cos)) {
    q = fused_rope(q, cos, sin);
    k = fused_rope(k, cos, sin);
  } else {
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
  }
  Tensor a = ops_.attention(q, k, v).transpose(1, 2).reshape({B, T, hq * D});
  Tensor out = x + ops_.exit_row(project(a, wo));
  if (slot >= 0) {
    // Mixture of experts (trainer/moe.h) on every token of this rank's rows.
    Tensor m = rms_norm(out, mlp_norm, spec_.rms_norm_eps);
    const int64_t Hm = m.size(-1);
    Tensor y = moe_mlp(m.reshape({-1, Hm}), part[4].view(lay.params[kGate].shape),
                       part[5].view(lay.params[kGate + 1].shape), part[6].view(lay.params[kGate + 2].shape),
                       part[7].view(lay.params[kGate + 3].shape), spec_.moe, routing ? *routing : moe_forward_, moe_stats_, slot,
                       ops_.experts);
    return out + y.view(m.sizes());
  }
  // SwiGLU MLP: down(silu(gate(h)) * up(h)).
  const int64_t h_mlp = lay.params[kGate].shape[1];
  Tensor m = ops_.enter_column(rms_norm(out, mlp_norm, spec_.rms_norm_eps));
  Tensor g;
  Tensor w_down;
  if (fused_swiglu_input) {
    w_down = part[5].view(lay.params[kDown].shape);
    Tensor gate_up = project(m, part[4].view({-1, h_mlp}));
    if (fused_ops_apply(gate_up)) {
      g = fused_swiglu(gate_up);
    } else {
      auto gu = gate_up.chunk(2, -1);
      g = at::silu(gu[0]) * gu[1];
    }
  } else {
    w_down = part[6].view(lay.params[kDown].shape);
    g = at::silu(project(m, part[4].view({-1, h_mlp}))) * project(m, part[5].view({-1, h_mlp}));
  }
  return out + ops_.exit_row(project(g, w_down));
}

std::pair<at::Tensor, at::Tensor> Model::rope_tables(int64_t T, const ForwardOptions& options, at::Device device) const {
  Tensor positions = options.positions ? *options.positions : at::arange(T, at::TensorOptions().device(device));
  return meshwork::trainer::rope_tables(positions, spec_, options.compute_dtype);
}

at::Tensor Model::loss_sum(const at::Tensor& tokens, const at::Tensor& targets,
                           WeightSource& weights, const ForwardOptions& options) const {
  return chunk_forward(whole(), tokens, targets, weights, options);
}

at::Tensor Model::chunk_forward(const PipelineChunk& chunk, const at::Tensor& input, const at::Tensor& targets,
                                WeightSource& weights, const ForwardOptions& options) const {
  std::vector<Tensor> rw;
  if (chunk.embedding || chunk.head) rw = views(0, weights.acquire(0));
  Tensor x = input;
  if (chunk.embedding) {
    TORCH_CHECK(root_embed_ >= 0, "this stage does not hold the embedding");
    x = ops_.embed(rw[root_embed_], input);
    // The root stays acquired until the head is done when one chunk holds both ends.
    if (!chunk.head) x = weights.release(0, x);
  }
  auto [cos, sin] = options.rope ? *options.rope : rope_tables(targets.size(1), options, targets.device());
  const int64_t sparse_layers = static_cast<int64_t>(moe_stats_.layers.size());
  if (sparse_layers > 0) {
    // A fresh routing record per forward call (earlier calls' backward nodes keep theirs).
    const MoeSpec& moe = spec_.moe;
    const auto fp32 = at::TensorOptions().dtype(at::kFloat).device(targets.device());
    moe_forward_.counts = at::zeros({moe.num_experts}, fp32);
    moe_forward_.prob_sum = at::zeros({moe.num_experts}, fp32.dtype(at::kDouble));  // a sum over many rows
    moe_forward_.rows = 0;
    moe_forward_.recording = true;
    moe_forward_.grad_scale = at::zeros({1}, fp32.dtype(at::kDouble).device(at::kCPU));
    moe_forward_.aux_in_objective = moe.output_router_logits && moe.router_aux_loss_coef > 0;
    if (options.routing_in && !chunk.embedding) {
      // What the call's chunks on earlier stages routed (this rank's share of the call).
      const Tensor& in = *options.routing_in;
      moe_forward_.counts.copy_(in.narrow(0, 0, moe.num_experts));
      moe_forward_.prob_sum.copy_(in.narrow(0, moe.num_experts, moe.num_experts));
      moe_forward_.rows = in[2 * moe.num_experts].item<double>();
    }
  }
  const bool training = at::GradMode::is_enabled();
  const bool ckpt = options.activation_checkpointing && training;
  // The flight recorder's phase per decoder layer (evaluation keeps its own phase): forward here;
  // backward from a hook on the block's output, which runs just before the block's backward
  // (with checkpointing, CheckpointedBlock::backward marks it).
  FlightRecorder* flight = training ? thread_flight() : nullptr;
  for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
    if (flight) flight->phase(FlightPhase::forward, l);
    if (ckpt) {
      x = CheckpointedBlock::apply(x, cos, sin, static_cast<int64_t>(l), this, &weights);
    } else {
      const int unit = block_unit(l);
      Tensor flat = weights.acquire(unit);
      x = weights.release(unit, block_forward(l, flat, x, cos, sin));
      if (flight && x.requires_grad())
        x.register_hook([flight, l](const at::TensorBase&) { flight->phase(FlightPhase::backward, l); });
    }
  }
  if (!chunk.head) return x;
  TORCH_CHECK(root_norm_ >= 0, "this stage does not hold the final norm and head");
  Tensor h = rms_norm(x, rw[root_norm_], spec_.rms_norm_eps);
  Tensor head = root_head_ >= 0 ? rw[root_head_] : rw[root_embed_];
  Tensor loss = weights.release(0, ops_.head_loss_sum(h, head, targets));
  if (sparse_layers > 0) {
    // The forward is complete: checkpointed layers rerunning in backward must not count again.
    MoeForwardState& st = moe_forward_;
    st.recording = false;
    const int64_t E = spec_.moe.num_experts;
    if (ops_.sum_routing) {
      // The whole call's counts and probability sums (other ranks hold its other tokens); in
      // place, so that the layers' backward nodes read them.
      Tensor all = at::cat({st.counts.to(at::kDouble), st.prob_sum, at::full({1}, st.rows, st.prob_sum.options())});
      ops_.sum_routing(all);
      st.counts.copy_(all.narrow(0, 0, E));
      st.prob_sum.copy_(all.narrow(0, E, E));
      st.rows = all[2 * E].item<double>();
    }
    // d(J)/dS_e = loss_scale * coef * N * E c_e / R^2 for J = loss_scale * coef * N * aux, with
    // N = R / sparse layers the call's tokens (every token routed in every sparse layer).
    const double R = st.rows, N = R / static_cast<double>(sparse_layers);
    st.grad_scale.fill_(R > 0 ? options.loss_scale * spec_.moe.router_aux_loss_coef * N * static_cast<double>(E) / (R * R)
                              : 0.0);
    const double aux = moe_aux_loss(st, E);
    moe_stats_.aux_loss_sum += aux;
    ++moe_stats_.forwards;
    // transformers: loss = mean CE + coef * aux for the forward call, so the sum over the call's
    // tokens carries coef * aux * N: each rank adds its share (its targets; tp ranks, whose
    // losses are not summed, share theirs). Its gradient comes through the layers.
    if (spec_.moe.output_router_logits)
      loss = loss + spec_.moe.router_aux_loss_coef * aux * static_cast<double>(targets.numel());
  }
  return loss;
}

at::Tensor Model::routing_sums(const MoeForwardState& record) {
  return at::cat({record.counts.to(at::kDouble), record.prob_sum,
                  at::full({1}, record.rows, record.prob_sum.options())});
}

at::Tensor Model::routing_totals(const MoeForwardState& record) {
  return at::cat({record.counts.to(at::kDouble), record.grad_scale.to(record.counts.device())});
}

void Model::set_routing_totals(const MoeForwardState& record, const at::Tensor& totals) {
  const int64_t E = record.counts.numel();
  record.counts.copy_(totals.narrow(0, 0, E));
  record.grad_scale.copy_(totals.narrow(0, E, 1));
}

double Model::flops_per_token(int64_t seq_len) const {
  const double H = spec_.hidden_size, I = spec_.intermediate_size, D = spec_.head_dim;
  const double Hq = spec_.num_attention_heads, Hkv = spec_.num_key_value_heads;
  const double L = spec_.num_hidden_layers, V = spec_.vocab_size;
  const double attention = H * Hq * D + 2 * H * Hkv * D + Hq * D * H;
  // A sparse layer's matmuls per token: the router and the experts_per_token experts it runs.
  const double sparse = static_cast<double>(moe_stats_.layers.size());
  const double sparse_mlp = H * static_cast<double>(spec_.moe.num_experts) +
                            3 * H * static_cast<double>(spec_.moe.expert_intermediate_size * spec_.moe.experts_per_token);
  const double n_matmul = L * attention + (L - sparse) * 3 * H * I + sparse * sparse_mlp + V * H;
  return 6 * n_matmul + 12 * L * Hq * D * static_cast<double>(seq_len);
}

}  // namespace meshwork::trainer
