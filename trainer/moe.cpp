#include "trainer/moe.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "trainer/fused_ops.h"

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Identity on y; in backward also gives prob_sum the aux loss's gradient scale * counts, read
// when backward runs (the counts of the whole forward by then; module comment of moe.h).
struct RouterAuxGradient : public torch::autograd::Function<RouterAuxGradient> {
  static Tensor forward(AutogradContext* ctx, const Tensor& y, const Tensor& prob_sum, const Tensor& counts,
                        const Tensor& scale) {
    // Not save_for_backward: counts and scale are written in place until the call is complete.
    ctx->saved_data["counts"] = counts;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dtype"] = static_cast<int64_t>(prob_sum.scalar_type());
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    Tensor counts = ctx->saved_data["counts"].toTensor();
    const double scale = ctx->saved_data["scale"].toTensor().item<double>();
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {g[0], counts.to(dtype) * scale, Tensor(), Tensor()};
  }
};

Tensor project(const Tensor& x, const Tensor& w) {
  if (fused_linear_applies(x, w)) return fused_linear(x, w);
  return at::linear(x, w);
}

}  // namespace

at::Tensor run_grouped_experts(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                               const at::Tensor& up, const at::Tensor& down) {
  // A named scope in MESHTRAIN_PROFILE's traces (bench/moe_step.sh splits the experts' GEMMs
  // out of a step with it); free when no profiler runs.
  RECORD_FUNCTION("meshwork::experts", std::vector<c10::IValue>());
  std::vector<Tensor> outs;
  int64_t begin = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] == 0) continue;
    Tensor slice = rows.narrow(0, begin, counts[e]);
    const int64_t i = static_cast<int64_t>(e);
    Tensor g = at::silu(project(slice, gate[i])) * project(slice, up[i]);
    outs.push_back(project(g, down[i]));
    begin += counts[e];
  }
  // No rows at all (an ep rank nobody routed to): an empty result still tied to the weights, so
  // that backward reaches them (their gradient is zero) on every rank alike.
  if (outs.empty()) return rows.narrow(0, 0, 0) + 0 * (gate.sum() + up.sum() + down.sum()).to(rows.scalar_type());
  return at::cat(outs);
}

void MoeStepStats::reset(const ModelSpec& spec) {
  if (layers.empty())
    for (int l = 0; l < spec.num_hidden_layers; ++l)
      if (spec.layer_is_sparse(l)) layers.push_back(l);
  tokens_per_expert.assign(layers.size(), std::vector<double>(static_cast<size_t>(spec.moe.num_experts), 0.0));
  aux_loss_sum = 0;
  forwards = 0;
}

at::Tensor moe_mlp(const at::Tensor& x, const at::Tensor& router, const at::Tensor& expert_gate,
                   const at::Tensor& expert_up, const at::Tensor& expert_down, const MoeSpec& moe,
                   MoeForwardState& state, MoeStepStats& stats, int slot, const ExpertRunner& experts) {
  const int64_t E = moe.num_experts, K = moe.experts_per_token;
  // Router in fp32 (transformers: softmax(..., dtype=float)); fp64 stays fp64 (gradient checks).
  Tensor logits = project(x, router);
  if (logits.scalar_type() != at::kDouble) logits = logits.to(at::kFloat);
  Tensor probs = at::softmax(logits, -1);  // [N, E]
  auto [top_p, top_e] = probs.topk(K, -1);                             // [N, K]
  if (moe.norm_topk_prob) top_p = top_p / top_p.sum(-1, /*keepdim=*/true);
  Tensor weights = top_p.to(x.scalar_type()).reshape(-1);  // [N K]
  Tensor picks = top_e.reshape(-1);                         // [N K], pick j is token j / K
  // Sort the picks by expert (stable: tokens in order within an expert).
  Tensor order = std::get<1>(at::sort(picks, /*stable=*/std::optional<bool>(true), /*dim=*/0, /*descending=*/false));
  Tensor counts = at::bincount(picks, {}, E);  // [E] int64
  Tensor counts_cpu = counts.cpu();
  const int64_t* c = counts_cpu.data_ptr<int64_t>();
  Tensor token_of = order.div(K, "floor");
  Tensor rows = x.index_select(0, token_of);  // [N K, H], grouped by expert
  const std::vector<int64_t> count_list(c, c + E);
  Tensor sorted_out = experts ? experts(rows, count_list, expert_gate, expert_up, expert_down)
                              : run_grouped_experts(rows, count_list, expert_gate, expert_up, expert_down);
  Tensor y_sorted = sorted_out * weights.index_select(0, order).unsqueeze(1);
  Tensor y = at::zeros_like(x).index_add(0, token_of, y_sorted);

  if (state.recording) {
    for (int64_t e = 0; e < E; ++e) stats.tokens_per_expert[slot][e] += static_cast<double>(c[e]);
    state.counts.add_(counts_cpu.to(at::kFloat).to(state.counts.device()));
    state.prob_sum.add_(probs.detach().sum(0));
    state.rows += static_cast<double>(x.size(0));
  }
  if (state.aux_in_objective && at::GradMode::is_enabled())
    y = RouterAuxGradient::apply(y, probs.sum(0), state.counts, state.grad_scale);
  return y;
}

double moe_aux_loss(const MoeForwardState& state, int64_t num_experts) {
  if (state.rows == 0) return 0;
  const double dot = (state.counts.to(at::kDouble) * state.prob_sum.to(at::kDouble)).sum().item<double>();
  return static_cast<double>(num_experts) * dot / (state.rows * state.rows);
}

}  // namespace meshwork::trainer
