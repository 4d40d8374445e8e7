// The mixture-of-experts model (trainer/moe.h, docs/moe.md) on one process: its parameters are
// the spec's count, its gradients (language model and aux loss together, which reaches the router
// through a node that only knows the forward's counts in backward) equal central finite
// differences in fp64, activation checkpointing gives the same loss, gradients and routing
// counts, and the step statistics count each token's top-k picks once.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainer/model.h"

namespace {

using namespace meshwork;
using namespace meshwork::trainer;

// Qwen3-MoE-like: per-head q/k norms, 3 layers of which layer 1 keeps a dense MLP, 4 experts
// with 2 per token, a large aux coefficient so that its gradient is not lost in the rest.
ModelSpec tiny_moe(bool aux) {
  ModelSpec s;
  s.name = "tiny-moe";
  s.architecture = "qwen3_moe";
  s.hidden_size = 32;
  s.intermediate_size = 48;
  s.num_hidden_layers = 3;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 2;
  s.head_dim = 8;
  s.vocab_size = 64;
  s.max_position_embeddings = 256;
  s.qk_norm = QkNorm::per_head;
  s.moe.num_experts = 4;
  s.moe.experts_per_token = 2;
  s.moe.expert_intermediate_size = 16;
  s.moe.norm_topk_prob = true;
  s.moe.router_aux_loss_coef = 0.3;
  s.moe.output_router_logits = aux;
  s.moe.mlp_only_layers = {1};
  return s;
}

struct PlainWeights : WeightSource {
  std::vector<at::Tensor> units;
  at::Tensor acquire(int u) override { return units[u]; }
};

PlainWeights weights(const Model& m, at::ScalarType dtype) {
  PlainWeights w;
  for (int u = 0; u < m.num_units(); ++u) {
    at::Tensor t = m.init_unit(u, 3).to(dtype);
    // Norm weights away from one, so that a misplaced q/k norm shows.
    t.add_(at::randn(t.sizes(), at::TensorOptions().dtype(dtype)) * 0.05);
    w.units.push_back(t.set_requires_grad(true));
  }
  return w;
}

TEST(Moe, LayoutHoldsTheSpecsParametersAndSparseLayersOnly) {
  const ModelSpec spec = tiny_moe(true);
  Model m(spec);
  int64_t total = 0;
  for (int u = 0; u < m.num_units(); ++u) total += m.full_layout(u).numel();
  EXPECT_EQ(total, spec.parameter_count());
  EXPECT_GE(m.full_layout(Model::block_unit(0)).index("expert_gate"), 0);
  EXPECT_GE(m.full_layout(Model::block_unit(1)).index("w_gate"), 0);  // mlp_only_layers
  EXPECT_LT(m.full_layout(Model::block_unit(1)).index("router"), 0);
  EXPECT_GE(m.full_layout(Model::block_unit(2)).index("q_norm"), 0);
  EXPECT_EQ(m.moe_stats().layers, (std::vector<int>{0, 2}));
}

// Checks 42 elements' gradients of loss_sum * loss_scale against central differences.
void expect_finite_difference_gradients(bool aux) {
  Model m(tiny_moe(aux));
  at::manual_seed(11);
  PlainWeights w = weights(m, at::kDouble);
  at::Tensor tokens = at::randint(0, 64, {2, 16}, at::kLong), targets = at::randint(0, 64, {2, 16}, at::kLong);
  ForwardOptions o;
  o.compute_dtype = at::kDouble;
  o.loss_scale = 1.0 / 32;
  (m.loss_sum(tokens, targets, w, o) * o.loss_scale).backward();
  auto objective = [&] {
    at::NoGradGuard no_grad;
    return m.loss_sum(tokens, targets, w, o).item<double>() * o.loss_scale;
  };
  // Elements of every kind: router, each expert tensor, attention, q/k norms, in both sparse layers.
  int checked = 0;
  for (int layer : {0, 2}) {
    const int unit = Model::block_unit(layer);
    const UnitLayout& lay = m.full_layout(unit);
    for (const char* name : {"router", "expert_gate", "expert_up", "expert_down", "wq", "q_norm", "k_norm"}) {
      const int i = lay.index(name);
      ASSERT_GE(i, 0) << name;
      for (int64_t k : {int64_t{0}, lay.params[i].numel() / 2 + 1, lay.params[i].numel() - 1}) {
        const int64_t at_ = lay.offset(i) + k;
        at::Tensor flat = w.units[unit];
        const double analytic = flat.grad()[at_].item<double>();
        const double h = 1e-5, x0 = flat[at_].item<double>();
        {
          at::NoGradGuard no_grad;
          flat[at_].fill_(x0 + h);
        }
        const double up = objective();
        {
          at::NoGradGuard no_grad;
          flat[at_].fill_(x0 - h);
        }
        const double down = objective();
        {
          at::NoGradGuard no_grad;
          flat[at_].fill_(x0);
        }
        const double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(analytic, numeric, 1e-8 + 1e-5 * std::abs(numeric)) << "layer " << layer << " " << name << "[" << k << "]";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * 7 * 3);
}

TEST(Moe, GradientsEqualFiniteDifferences) { expect_finite_difference_gradients(false); }
TEST(Moe, GradientsEqualFiniteDifferencesWithTheAuxLoss) { expect_finite_difference_gradients(true); }

TEST(Moe, AuxLossIsInTheLossOnlyWhenTheConfigAsksAndCountsEveryPickOnce) {
  Model with(tiny_moe(true)), without(tiny_moe(false));
  at::manual_seed(12);
  PlainWeights w = weights(with, at::kFloat);
  at::Tensor tokens = at::randint(0, 64, {2, 16}, at::kLong), targets = at::randint(0, 64, {2, 16}, at::kLong);
  at::NoGradGuard no_grad;
  with.moe_stats().reset(with.spec());
  const double a = with.loss_sum(tokens, targets, w, {}).item<double>();
  const double b = without.loss_sum(tokens, targets, w, {}).item<double>();
  const MoeStepStats& stats = with.moe_stats();
  ASSERT_EQ(stats.forwards, 1);
  // aux = E sum_e (c_e / R)(S_e / R): K (here 2) for perfectly even routing.
  const double aux = stats.aux_loss_sum;
  EXPECT_GT(aux, 0.5);
  EXPECT_NEAR(a - b, 0.3 * aux * 32, 1e-3 * a);
  for (const auto& per_expert : stats.tokens_per_expert) {
    double sum = 0;
    for (double c : per_expert) sum += c;
    EXPECT_EQ(sum, 32 * 2);  // every token's two picks, no token dropped
  }
}

TEST(Moe, ActivationCheckpointingGivesTheSameLossGradientsAndCounts) {
  Model m(tiny_moe(true));
  at::manual_seed(13);
  PlainWeights plain = weights(m, at::kFloat), ckpt;
  for (const auto& u : plain.units) ckpt.units.push_back(u.detach().clone().set_requires_grad(true));
  at::Tensor tokens = at::randint(0, 64, {2, 16}, at::kLong), targets = at::randint(0, 64, {2, 16}, at::kLong);
  ForwardOptions o;
  o.loss_scale = 1.0 / 32;
  m.moe_stats().reset(m.spec());
  at::Tensor l0 = m.loss_sum(tokens, targets, plain, o);
  (l0 * o.loss_scale).backward();
  const auto counts_plain = m.moe_stats().tokens_per_expert;
  o.activation_checkpointing = true;
  m.moe_stats().reset(m.spec());
  at::Tensor l1 = m.loss_sum(tokens, targets, ckpt, o);
  (l1 * o.loss_scale).backward();
  EXPECT_EQ(m.moe_stats().tokens_per_expert, counts_plain);  // the rerun in backward counts nothing
  EXPECT_NEAR(l0.item<double>(), l1.item<double>(), 1e-6 * l0.item<double>());
  for (size_t u = 0; u < plain.units.size(); ++u) {
    at::Tensor g0 = plain.units[u].grad(), g1 = ckpt.units[u].grad();
    EXPECT_LT((g0 - g1).norm().item<double>(), 1e-6 * g0.norm().item<double>() + 1e-9) << "unit " << u;
  }
}

}  // namespace
