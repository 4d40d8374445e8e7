// The fused element-wise kernels (trainer/fused_ops.h) against the composite ATen definitions
// they replace: outputs and every input gradient under a random output gradient, on layouts
// the model hands them (a transposed view of a projection for RoPE, gate|up in one tensor);
// and the fused AdamW: shards cut anywhere update exactly as the full tensor, and the
// on-the-fly gradient scale equals scaling the gradient first.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "trainer/fused_ops.h"
#include "trainer/train.h"

namespace meshwork::trainer {
namespace {

using at::Tensor;

Tensor rms_norm_ref(const Tensor& x, const Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}
Tensor rotate_half(const Tensor& x) {
  auto h = x.chunk(2, -1);
  return at::cat({-h[1], h[0]}, -1);
}
Tensor rope_ref(const Tensor& x, const Tensor& c, const Tensor& s) { return x * c + rotate_half(x) * s; }
Tensor swiglu_ref(const Tensor& gu) {
  auto h = gu.chunk(2, -1);
  return at::silu(h[0]) * h[1];
}

void expect_close(const Tensor& a, const Tensor& b, double tol, const char* what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = (a - b).abs().max().item<double>();
  const double scale = b.abs().max().item<double>();
  EXPECT_LE(err, tol * std::max(1.0, scale)) << what << ": max error " << err;
}

TEST(FusedOps, RmsNormMatchesCompositeForwardAndBackward) {
  at::manual_seed(3);
  // 3 x 37 rows of 64 (rows not a multiple of any grain), weight away from one.
  Tensor x = at::randn({3, 37, 64}).requires_grad_(true);
  Tensor w = (1 + 0.1 * at::randn({64})).requires_grad_(true);
  Tensor x2 = x.detach().clone().requires_grad_(true), w2 = w.detach().clone().requires_grad_(true);
  Tensor gy = at::randn({3, 37, 64});
  Tensor y = fused_rms_norm(x, w, 1e-5), y2 = rms_norm_ref(x2, w2, 1e-5);
  expect_close(y, y2, 1e-6, "rms_norm forward");
  y.backward(gy);
  y2.backward(gy);
  expect_close(x.grad(), x2.grad(), 1e-5, "rms_norm dx");
  expect_close(w.grad(), w2.grad(), 1e-5, "rms_norm dw");
}

TEST(FusedOps, RopeMatchesCompositeOnATransposedProjection) {
  at::manual_seed(4);
  const int64_t B = 2, T = 9, Hh = 3, D = 8;
  // As in the block: q is a column slice of the fused q|k|v output [B, T, 2*Hh*D], viewed
  // [B, T, Hh, D] and transposed to [B, Hh, T, D] (strided, inner dimension contiguous).
  Tensor qkv = at::randn({B, T, 2 * Hh * D}).requires_grad_(true);
  Tensor qkv2 = qkv.detach().clone().requires_grad_(true);
  auto view = [&](const Tensor& t) { return t.narrow(-1, 0, Hh * D).view({B, T, Hh, D}).transpose(1, 2); };
  Tensor pos = at::arange(T, at::kFloat);
  Tensor inv = at::pow(10000.0, -at::arange(0, D, 2, at::kFloat) / static_cast<double>(D));
  Tensor ang = at::outer(pos, inv);
  Tensor emb = at::cat({ang, ang}, -1);
  Tensor c = emb.cos(), s = emb.sin();
  Tensor y = fused_rope(view(qkv), c, s), y2 = rope_ref(view(qkv2), c, s);
  expect_close(y, y2, 1e-6, "rope forward");
  Tensor gy = at::randn({B, Hh, T, D});
  y.backward(gy);
  y2.backward(gy);
  expect_close(qkv.grad(), qkv2.grad(), 1e-6, "rope dx");
  // The untouched columns get a zero gradient, not garbage.
  EXPECT_EQ(qkv.grad().narrow(-1, Hh * D, Hh * D).abs().max().item<double>(), 0.0);
}

TEST(FusedOps, SwigluMatchesComposite) {
  at::manual_seed(5);
  Tensor gu = at::randn({2, 7, 2 * 24}).requires_grad_(true);
  Tensor gu2 = gu.detach().clone().requires_grad_(true);
  Tensor y = fused_swiglu(gu), y2 = swiglu_ref(gu2);
  expect_close(y, y2, 1e-6, "swiglu forward");
  Tensor gy = at::randn({2, 7, 24});
  y.backward(gy);
  y2.backward(gy);
  expect_close(gu.grad(), gu2.grad(), 1e-6, "swiglu dgate|dup");
}

TEST(FusedOps, SwigluGradientAtZeroAndLargeGates) {
  // sigmoid saved instead of silu: no division by the gate, so g = 0 and |g| large are exact.
  Tensor gu = at::tensor({0.0f, 30.0f, -30.0f, 1.0f, 2.0f, 3.0f}).view({1, 6}).requires_grad_(true);
  Tensor gu2 = gu.detach().clone().requires_grad_(true);
  Tensor gy = at::ones({1, 3});
  fused_swiglu(gu).backward(gy);
  swiglu_ref(gu2).backward(gy);
  EXPECT_TRUE(at::isfinite(gu.grad()).all().item<bool>());
  expect_close(gu.grad(), gu2.grad(), 1e-6, "swiglu grad at 0 and +-30");
}

TEST(FusedOps, SumOfSquaresMatchesCompositeWhateverTheThreadCount) {
  at::manual_seed(7);
  Tensor t = at::randn({100003}) * 3;
  const double want = t.pow(2).sum(at::kDouble).item<double>();
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const double one = fused_sum_squares(t);
  at::set_num_threads(2);
  const double two = fused_sum_squares(t);
  at::set_num_threads(threads);
  EXPECT_NEAR(one, want, 1e-9 * want);
  EXPECT_EQ(one, two);  // fixed chunks summed in order
  EXPECT_EQ(fused_sum_squares(at::zeros({0})), 0.0);
}

TEST(FusedOps, AdamWShardsCutAnywhereMatchTheFullTensorAndScaleOnTheFly) {
  // Large enough to be split between threads; shards cut at an odd element.
  at::manual_seed(6);
  const int64_t n = 100003, cut = 40961;
  Tensor full = at::randn({n}).set_requires_grad(true);
  Tensor a = full.detach().narrow(0, 0, cut).clone().set_requires_grad(true);
  Tensor b = full.detach().narrow(0, cut, n - cut).clone().set_requires_grad(true);
  Tensor pre = full.detach().clone().set_requires_grad(true);  // gradient pre-scaled
  AdamW one, two, three;
  std::vector<Tensor> p1{full}, p2{a, b}, p3{pre};
  one.init(p1);
  two.init(p2);
  three.init(p3);
  for (int s = 0; s < 3; ++s) {
    Tensor g = at::randn({n});
    full.mutable_grad() = g.clone();
    a.mutable_grad() = g.narrow(0, 0, cut).clone();
    b.mutable_grad() = g.narrow(0, cut, n - cut).clone();
    pre.mutable_grad() = g * 0.25f;
    one.update(p1, 1e-2, 0.25);
    two.update(p2, 1e-2, 0.25);
    three.update(p3, 1e-2);
  }
  EXPECT_TRUE(at::equal(full.detach(), at::cat({a.detach(), b.detach()})));
  EXPECT_TRUE(at::equal(full.detach(), pre.detach()));
  // And the fused step is AdamW: one step from zero state moves each element by about lr.
  Tensor p = at::randn({64}).set_requires_grad(true);
  Tensor before = p.detach().clone();
  p.mutable_grad() = at::randn({64});
  AdamW opt;
  opt.weight_decay = 0;
  std::vector<Tensor> ps{p};
  opt.init(ps);
  opt.update(ps, 1e-3);
  // Step 1: m/bc1 = g, sqrt(v/bc2) = |g|, so p moves by -lr * sign(g) (eps aside).
  expect_close(p.detach() - before, -1e-3 * p.grad().sign(), 1e-6, "first AdamW step");
}

TEST(FusedOps, LinearMatchesATenForwardAndBackward) {
  if (!fused_linear_applies(at::zeros({1, 2}), at::zeros({3, 2})))
    GTEST_FAIL() << "this CPU lacks AVX2/FMA: the fused linear cannot run here";
  // Rows not a multiple of the 6-row blocks, columns not a multiple of the 16-column panels, odd
  // depths, a 3-D input, an input whose rows are strided (a slice of a wider projection), and a
  // depth whose packed B exceeds the 8 MiB pack buffer (columns in two groups).
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {7, 5, 17}, {64, 32, 48}, {100, 77, 33}, {512, 256, 96}, {14, 8192, 300}}) {
    at::manual_seed(M + 13 * K + N);
    for (bool strided : {false, true}) {
      Tensor wide = at::randn({M, strided ? K + 9 : K});
      Tensor x = wide.narrow(1, 0, K).detach().requires_grad_(true);
      if (M % 2 == 0) x = x.detach().view({2, M / 2, K}).requires_grad_(true);
      Tensor w = at::randn({N, K}).requires_grad_(true);
      Tensor x2 = x.detach().to(at::kDouble).requires_grad_(true);
      Tensor w2 = w.detach().to(at::kDouble).requires_grad_(true);
      Tensor y = fused_linear(x, w), y2 = at::linear(x2, w2);
      const std::string what = "M=" + std::to_string(M) + " K=" + std::to_string(K) +
                               " N=" + std::to_string(N) + (strided ? " strided" : "");
      expect_close(y, y2.to(at::kFloat), 1e-6, (what + " forward").c_str());
      Tensor gy = at::randn(y.sizes());
      y.backward(gy);
      y2.backward(gy.to(at::kDouble));
      expect_close(x.grad(), x2.grad().to(at::kFloat), 1e-6, (what + " dx").c_str());
      expect_close(w.grad(), w2.grad().to(at::kFloat), 1e-6, (what + " dw").c_str());
    }
  }
}

TEST(FusedOps, LinearIsTheSameBitsAtOneAndTwoThreads) {
  at::manual_seed(5);
  Tensor x = at::randn({2, 150, 96}).requires_grad_(true), w = at::randn({200, 96}).requires_grad_(true);
  Tensor gy = at::randn({2, 150, 200});
  std::vector<Tensor> runs;
  const int threads = at::get_num_threads();
  for (int n : {1, 2}) {
    at::set_num_threads(n);
    Tensor y = fused_linear(x, w);
    auto g = torch::autograd::grad({y}, {x, w}, {gy});
    runs.push_back(at::cat({y.flatten(), g[0].flatten(), g[1].flatten()}));
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(runs[0], runs[1]));
}

// Causal grouped-query attention in double, composite: the definition the kernels implement.
Tensor attention_ref(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t rep = q.size(1) / k.size(1), T = q.size(2);
  Tensor kk = k.repeat_interleave(rep, 1), vv = v.repeat_interleave(rep, 1);
  Tensor s = at::matmul(q, kk.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(3)));
  Tensor future = at::ones({T, T}, at::kBool).triu(1);
  return at::matmul(at::softmax(s.masked_fill(future, -INFINITY), -1), vv);
}

TEST(FusedOps, CausalAttentionMatchesCompositeForwardAndBackward) {
  if (!fused_attention_applies(at::zeros({1, 1, 1, 2}), at::zeros({1, 1, 1, 2}), at::zeros({1, 1, 1, 2})))
    GTEST_FAIL() << "this CPU lacks AVX2/FMA: the fused attention cannot run here";
  // Lengths below, at and across tile edges (64 rows) and register blocks (6 rows, 16 columns),
  // head dims that fill 16-column panels or not, heads sharing a kv head or not, and q, k, v as
  // the block hands them: strided head views of one fused projection.
  for (auto [T, D, Hq, Hkv] : std::vector<std::array<int64_t, 4>>{
           {1, 8, 2, 1}, {100, 8, 4, 2}, {64, 32, 2, 2}, {256, 32, 8, 4}, {130, 16, 3, 1},
           {200, 24, 4, 2}, {70, 64, 2, 1}}) {
    at::manual_seed(T * 7 + D);
    const int64_t B = 2;
    Tensor qkv = (2 * at::randn({B, T, (Hq + 2 * Hkv) * D})).requires_grad_(true);
    Tensor qkv_ref = qkv.detach().to(at::kDouble).requires_grad_(true);
    auto heads = [&](const Tensor& x) {
      auto p = x.split_with_sizes({Hq * D, Hkv * D, Hkv * D}, -1);
      return std::array<Tensor, 3>{p[0].view({B, T, Hq, D}).transpose(1, 2),
                                   p[1].view({B, T, Hkv, D}).transpose(1, 2),
                                   p[2].view({B, T, Hkv, D}).transpose(1, 2)};
    };
    auto [q, k, v] = heads(qkv);
    auto [q2, k2, v2] = heads(qkv_ref);
    Tensor out = fused_causal_attention(q, k, v), out_ref = attention_ref(q2, k2, v2);
    const std::string what = "T=" + std::to_string(T) + " D=" + std::to_string(D) + " Hq=" +
                             std::to_string(Hq) + " Hkv=" + std::to_string(Hkv);
    expect_close(out, out_ref.to(at::kFloat), 2e-6, (what + " forward").c_str());
    // The output is [B, T, Hq, D] in memory: the projection after it reads it without a copy.
    EXPECT_TRUE(out.transpose(1, 2).is_contiguous()) << what;
    Tensor gy = at::randn({B, Hq, T, D});
    out.backward(gy);
    out_ref.backward(gy.to(at::kDouble));
    expect_close(qkv.grad(), qkv_ref.grad().to(at::kFloat), 1e-5, (what + " d(q|k|v)").c_str());
  }
}

TEST(FusedOps, CausalAttentionIsTheSameBitsAtOneAndTwoThreads) {
  at::manual_seed(11);
  Tensor q = at::randn({2, 4, 96, 16}).requires_grad_(true), k = at::randn({2, 2, 96, 16}).requires_grad_(true);
  Tensor v = at::randn({2, 2, 96, 16}).requires_grad_(true), gy = at::randn({2, 4, 96, 16});
  std::vector<Tensor> runs;
  const int threads = at::get_num_threads();
  for (int n : {1, 2}) {
    at::set_num_threads(n);
    Tensor out = fused_causal_attention(q, k, v);
    auto g = torch::autograd::grad({out}, {q, k, v}, {gy});
    runs.push_back(at::cat({out.flatten(), g[0].flatten(), g[1].flatten(), g[2].flatten()}));
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(runs[0], runs[1]));
}

}  // namespace
}  // namespace meshwork::trainer
