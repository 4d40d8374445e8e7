// AdamW (decoupled weight decay, Loshchilov & Hutter; torch.optim.AdamW's update) in one pass
// over contiguous fp32 CPU tensors: p, g, m, v read once, p, m, v written once.
//
// Step t with learning rate lr, gradient g and clipping coefficient c (trainer/train.cpp):
//   g' = c g                                   (clipping folded into the read of g)
//   m = b1 m + (1 - b1) g'                     (first moment)
//   v = b2 v + (1 - b2) g'^2                   (second moment)
//   mhat = m / bc1,  bc1 = 1 - b1^t            (bias correction: m and v start at 0, so their
//   vhat = v / bc2,  bc2 = 1 - b2^t             average underestimates by 1 - b^t)
//   p = p - lr wd p - lr mhat / (sqrt(vhat) + eps)
// The decay is decoupled: it shrinks p directly instead of being added to g as an L2 term
// (which the 1/sqrt(vhat) scaling would then weaken for parameters with large gradients). As
// computed, folding constants:
//   p = p (1 - lr wd) + (-lr / bc1) m / (sqrt(v / bc2) + eps)
// Every element goes through the same float operations whatever its position or the thread
// count, so a shard updates exactly as the same elements of the full tensor.
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "trainer/fused_ops.h"
#include "trainer/vec_math.h"

namespace meshwork::trainer {

namespace {

struct AdamWConstants {
  float decay, b1, c1, b2, c2, inv_bc2, eps, step_size, grad_scale;
};

// The AdamW update of elements [b, end), 8 at a time. The last partial vector goes through the
// same vector operations on masked loads and stores, so an element's result does not depend on
// where a range (a thread's chunk, an FSDP shard) starts or ends.
MESHWORK_AVX2 void adamw_range_avx2(const AdamWConstants& k, float* p, const float* g, float* m,
                                    float* v, int64_t b, int64_t end) {
  const __m256 decay = _mm256_set1_ps(k.decay), b1 = _mm256_set1_ps(k.b1), c1 = _mm256_set1_ps(k.c1);
  const __m256 b2 = _mm256_set1_ps(k.b2), c2 = _mm256_set1_ps(k.c2);
  const __m256 inv_bc2 = _mm256_set1_ps(k.inv_bc2), eps = _mm256_set1_ps(k.eps);
  const __m256 step = _mm256_set1_ps(k.step_size), scale = _mm256_set1_ps(k.grad_scale);
  auto update = [&](__m256 pj, __m256 gj, __m256 mj, __m256 vj, __m256* po, __m256* mo, __m256* vo)
                    MESHWORK_AVX2 {
    gj = _mm256_mul_ps(gj, scale);
    mj = _mm256_fmadd_ps(mj, b1, _mm256_mul_ps(gj, c1));
    vj = _mm256_fmadd_ps(vj, b2, _mm256_mul_ps(_mm256_mul_ps(gj, gj), c2));
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vj, inv_bc2)), eps);
    *po = _mm256_fmadd_ps(pj, decay, _mm256_mul_ps(step, _mm256_div_ps(mj, denom)));
    *mo = mj;
    *vo = vj;
  };
  int64_t j = b;
  for (; j + 8 <= end; j += 8) {
    __m256 po, mo, vo;
    update(_mm256_loadu_ps(p + j), _mm256_loadu_ps(g + j), _mm256_loadu_ps(m + j),
           _mm256_loadu_ps(v + j), &po, &mo, &vo);
    _mm256_storeu_ps(p + j, po);
    _mm256_storeu_ps(m + j, mo);
    _mm256_storeu_ps(v + j, vo);
  }
  if (j < end) {
    const __m256i mask = vec::tail_mask(end - j);
    __m256 po, mo, vo;
    update(_mm256_maskload_ps(p + j, mask), _mm256_maskload_ps(g + j, mask),
           _mm256_maskload_ps(m + j, mask), _mm256_maskload_ps(v + j, mask), &po, &mo, &vo);
    _mm256_maskstore_ps(p + j, mask, po);
    _mm256_maskstore_ps(m + j, mask, mo);
    _mm256_maskstore_ps(v + j, mask, vo);
  }
}

}  // namespace

void fused_adamw_(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, double lr,
                  double beta1, double beta2, double eps, double weight_decay, double bc1,
                  double bc2, double grad_scale) {
  TORCH_CHECK(fused_ops_apply(p) && fused_ops_apply(g) && fused_ops_apply(m) && fused_ops_apply(v) &&
                  p.is_contiguous() && g.is_contiguous() && m.is_contiguous() && v.is_contiguous() &&
                  g.numel() == p.numel() && m.numel() == p.numel() && v.numel() == p.numel(),
              "fused_adamw_: contiguous fp32 CPU tensors of one size");
  const float decay = static_cast<float>(1 - lr * weight_decay);
  const float b1 = static_cast<float>(beta1), c1 = static_cast<float>(1 - beta1);
  const float b2 = static_cast<float>(beta2), c2 = static_cast<float>(1 - beta2);
  const float inv_bc2 = static_cast<float>(1 / bc2), e = static_cast<float>(eps);
  const float step_size = static_cast<float>(-lr / bc1), s = static_cast<float>(grad_scale);
  AdamWConstants k{decay, b1, c1, b2, c2, inv_bc2, e, step_size, s};
  float* pp = p.data_ptr<float>();
  const float* gp = g.const_data_ptr<float>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  const bool avx2 = cpu_has_avx2_fma();
  at::parallel_for(0, p.numel(), int64_t{1} << 15, [&](int64_t b, int64_t end) {
    if (avx2) {
      adamw_range_avx2(k, pp, gp, mp, vp, b, end);
      return;
    }
    for (int64_t j = b; j < end; ++j) {
      const float gj = gp[j] * k.grad_scale;
      const float mj = mp[j] * k.b1 + gj * k.c1;
      const float vj = vp[j] * k.b2 + (gj * gj) * k.c2;
      mp[j] = mj;
      vp[j] = vj;
      pp[j] = pp[j] * k.decay + k.step_size * (mj / (std::sqrt(vj * k.inv_bc2) + k.eps));
    }
  });
}

}  // namespace meshwork::trainer
