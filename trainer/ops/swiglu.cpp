// SwiGLU (Llama's MLP activation) on gate and up in one tensor, one autograd node.
//
// Forward, per row of gu [2I] (gate g = gu[:I], up u = gu[I:]), s = sigmoid(g):
//   h = silu(g) u = g s u
// s is computed without overflow: with e = exp(-|g|) <= 1,
//   s = 1 / (1 + e) (g >= 0),  s = e / (1 + e) (g < 0).
//
// Backward, given dh: sigmoid' = s (1 - s), so
//   d(g s)/dg = s + g s (1 - s) = s (1 + g (1 - s))
//   du = dh g s
//   dg = dh u s (1 + g (1 - s))
// written into one [..., 2I] tensor (gate then up): no concatenation of two halves.
//
// Saves gu and s: the same two tensors' worth of memory as the composite silu/mul pair (gu and
// silu(g)), but the backward then needs no exp and runs as one pass (it was three kernels on
// strided halves and a temporary).
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "trainer/fused_ops.h"
#include "trainer/ops/rows.h"
#include "trainer/vec_math.h"

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// sigmoid(x) of 8 lanes from e = exp(-|x|) (the overflow-free form above).
MESHWORK_AVX2 inline __m256 swiglu_sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = vec::exp_nonpositive(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
  const __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, e));
  return _mm256_blendv_ps(r, _mm256_mul_ps(e, r), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

// One row's forward, n = I. The tail goes through the same vector arithmetic (masked loads and
// stores only there: masked stores are slow on AMD cores), so an element's bits do not depend on
// its column (tp shards agree).
MESHWORK_AVX2 void swiglu_forward_row(const float* g, const float* u, float* s, float* h, int64_t n) {
  const int64_t full = n & ~int64_t{7};
  for (int64_t j = 0; j < full; j += 8) {
    const __m256 x = _mm256_loadu_ps(g + j);
    const __m256 sg = swiglu_sigmoid(x);
    _mm256_storeu_ps(s + j, sg);
    _mm256_storeu_ps(h + j, _mm256_mul_ps(_mm256_mul_ps(x, sg), _mm256_loadu_ps(u + j)));
  }
  if (full < n) {
    const __m256i mask = vec::tail_mask(n - full);
    const __m256 x = _mm256_maskload_ps(g + full, mask);
    const __m256 sg = swiglu_sigmoid(x);
    _mm256_maskstore_ps(s + full, mask, sg);
    _mm256_maskstore_ps(h + full, mask, _mm256_mul_ps(_mm256_mul_ps(x, sg), _mm256_maskload_ps(u + full, mask)));
  }
}

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& gu_in) {
    Tensor gu = gu_in.contiguous();
    const int64_t I = gu.size(-1) / 2, N = gu.numel() / (2 * I);
    std::vector<int64_t> shape(gu.sizes().begin(), gu.sizes().end());
    shape.back() = I;
    Tensor h = at::empty(shape, gu.options());
    const bool avx2 = cpu_has_avx2_fma();
    // Without AVX2, ATen's sigmoid (a kernel of its own on the strided gate half).
    Tensor sig = avx2 ? at::empty(shape, gu.options()) : at::sigmoid(gu.narrow(-1, 0, I));
    const float* gp = gu.const_data_ptr<float>();
    float* sp = sig.data_ptr<float>();
    float* hp = h.data_ptr<float>();
    ops::parallel_rows(N, I, [&](int64_t r) {
      const float* g = gp + r * 2 * I;
      const float* u = g + I;
      float* s = sp + r * I;
      float* o = hp + r * I;
      if (avx2) {
        swiglu_forward_row(g, u, s, o, I);
      } else {
        for (int64_t j = 0; j < I; ++j) o[j] = (g[j] * s[j]) * u[j];
      }
    });
    ctx->save_for_backward({gu, sig});
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &gu = saved[0], &sig = saved[1];
    const Tensor dh = grads[0].contiguous();
    const int64_t I = gu.size(-1) / 2;
    Tensor out = at::empty(gu.sizes(), gu.options());
    const float* sp = sig.const_data_ptr<float>();
    const float* dp = dh.const_data_ptr<float>();
    const float* gp = gu.const_data_ptr<float>();
    float* op = out.data_ptr<float>();
    ops::parallel_rows(gu.numel() / (2 * I), I, [&](int64_t r) {
      const float* g = gp + r * 2 * I;
      const float* u = g + I;
      const float* s = sp + r * I;
      const float* d = dp + r * I;
      float* dg = op + r * 2 * I;
      float* du = dg + I;
      for (int64_t j = 0; j < I; ++j) {
        du[j] = d[j] * (g[j] * s[j]);
        dg[j] = (d[j] * u[j]) * (s[j] * (1.0f + g[j] * (1.0f - s[j])));
      }
    });
    return {out};
  }
};

}  // namespace

at::Tensor fused_swiglu(const at::Tensor& gu) {
  TORCH_CHECK(gu.size(-1) % 2 == 0, "fused_swiglu: the last dimension holds gate and up");
  return SwigluFn::apply(gu);
}

}  // namespace meshwork::trainer
