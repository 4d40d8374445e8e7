#include "trainer/attention_kernels.h"

#include <algorithm>
#include <cmath>

#include "trainer/vec_math.h"

// The BLAS that LibTorch's CPU library carries (MKL in the x86 wheels): the Fortran interface,
// column-major, 32-bit sizes. Called from inside ATen's parallel regions it runs on the calling
// thread, as ATen's own flash attention does.
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c,
                       const int* ldc);

namespace meshwork::trainer {
namespace {

using vec::exp_nonpositive;
using vec::hmax;
using vec::hsum;
using vec::tail_mask;

// Row-major C[M x N] = alpha op(A)[M x K] op(B)[K x N] + beta C: the column-major call computing
// C^T = op(B)^T op(A)^T on the same memory.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  const int LDA = static_cast<int>(lda), LDB = static_cast<int>(ldb), LDC = static_cast<int>(ldc);
  sgemm_(&tb, &ta, &N, &M, &K, &alpha, b, &LDB, a, &LDA, &beta, c, &LDC);
}

// Row of scores s[0, n) of which [0, valid) are causal: s becomes exp(s - max) on [0, valid) and
// 0 after (the normalization 1/sum is applied to the row's output, D values, not to its n
// probabilities); returns log-sum-exp and sets *inv_sum.
MESHWORK_AVX2 float softmax_row(float* s, int64_t valid, int64_t n, float* inv_sum) {
  const int64_t full = valid & ~int64_t{7};
  const __m256i tail = tail_mask(valid - full);
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 vmax = neg_inf;
  for (int64_t j = 0; j < full; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
  if (full < valid)
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(s + full, tail),
                                                 _mm256_castsi256_ps(tail)));
  const float m = hmax(vmax);
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < full; j += 8) {
    const __m256 p = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, p);
    sum = _mm256_add_ps(sum, p);
  }
  if (full < valid) {
    const __m256 p = _mm256_and_ps(exp_nonpositive(_mm256_sub_ps(_mm256_maskload_ps(s + full, tail), vm)),
                                   _mm256_castsi256_ps(tail));
    _mm256_maskstore_ps(s + full, tail, p);
    sum = _mm256_add_ps(sum, p);
  }
  std::fill(s + valid, s + n, 0.0f);
  const float total = hsum(sum);
  *inv_sum = 1.0f / total;
  return m + std::log(total);
}

// s[0, valid) = exp(s - lse) (the forward's probabilities, recomputed), 0 after.
MESHWORK_AVX2 void probabilities_row(float* s, int64_t valid, int64_t n, float lse) {
  const int64_t full = valid & ~int64_t{7};
  const __m256 vl = _mm256_set1_ps(lse);
  for (int64_t j = 0; j < full; j += 8)
    _mm256_storeu_ps(s + j, exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), vl)));
  if (full < valid) {
    const __m256i tail = tail_mask(valid - full);
    _mm256_maskstore_ps(s + full, tail, exp_nonpositive(_mm256_sub_ps(_mm256_maskload_ps(s + full, tail), vl)));
  }
  std::fill(s + valid, s + n, 0.0f);
}

// dp[0, n) = p (dp - delta) scale (p is 0 past the causal edge, so dS is too).
MESHWORK_AVX2 void score_grad_row(const float* p, float* dp, int64_t n, float delta, float scale) {
  const __m256 vd = _mm256_set1_ps(delta), vs = _mm256_set1_ps(scale);
  const int64_t full = n & ~int64_t{7};
  for (int64_t j = 0; j < full; j += 8) {
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd));
    _mm256_storeu_ps(dp + j, _mm256_mul_ps(g, vs));
  }
  for (int64_t j = full; j < n; ++j) dp[j] = p[j] * (dp[j] - delta) * scale;
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

}  // namespace

int64_t attention_forward_scratch(int64_t T) { return kAttentionTileRows * T; }
int64_t attention_backward_scratch(int64_t T) { return 2 * kAttentionTileRows * T; }

void attention_head_forward(int64_t T, int64_t D, const HeadPtrs& in, float* out, int64_t out_ld,
                            float* lse, float* scratch) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int64_t i0 = 0; i0 < T; i0 += kAttentionTileRows) {
    // Tile rows [i0, i0 + m) attend to keys [0, n): the causal edge of the tile's last row.
    const int64_t m = std::min(kAttentionTileRows, T - i0), n = i0 + m;
    float* s = scratch;
    gemm(false, true, m, n, D, scale, in.q + i0 * in.q_ld, in.q_ld, in.k, in.k_ld, 0.0f, s, n);
    float inv_sum[kAttentionTileRows];
    for (int64_t r = 0; r < m; ++r) lse[i0 + r] = softmax_row(s + r * n, i0 + r + 1, n, &inv_sum[r]);
    gemm(false, false, m, D, n, 1.0f, s, n, in.v, in.v_ld, 0.0f, out + i0 * out_ld, out_ld);
    for (int64_t r = 0; r < m; ++r) {
      float* o = out + (i0 + r) * out_ld;
      for (int64_t d = 0; d < D; ++d) o[d] *= inv_sum[r];
    }
  }
}

void attention_head_backward(int64_t T, int64_t D, const HeadPtrs& in, const float* out,
                             int64_t out_ld, const float* dout, int64_t dout_ld, const float* lse,
                             float* dq, int64_t dq_ld, float* dk, int64_t dk_ld, float* dv,
                             int64_t dv_ld, float* scratch) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  float* p = scratch;
  float* ds = scratch + kAttentionTileRows * T;
  for (int64_t i0 = 0; i0 < T; i0 += kAttentionTileRows) {
    const int64_t m = std::min(kAttentionTileRows, T - i0), n = i0 + m;
    const float* q_t = in.q + i0 * in.q_ld;
    const float* do_t = dout + i0 * dout_ld;
    gemm(false, true, m, n, D, scale, q_t, in.q_ld, in.k, in.k_ld, 0.0f, p, n);
    for (int64_t r = 0; r < m; ++r) probabilities_row(p + r * n, i0 + r + 1, n, lse[i0 + r]);
    gemm(true, false, n, D, m, 1.0f, p, n, do_t, dout_ld, 1.0f, dv, dv_ld);   // dV += P^T dO
    gemm(false, true, m, n, D, 1.0f, do_t, dout_ld, in.v, in.v_ld, 0.0f, ds, n);  // dP = dO V^T
    for (int64_t r = 0; r < m; ++r) {
      const float delta = dot(do_t + r * dout_ld, out + (i0 + r) * out_ld, D);
      score_grad_row(p + r * n, ds + r * n, n, delta, scale);  // dS (scaled)
    }
    gemm(false, false, m, D, n, 1.0f, ds, n, in.k, in.k_ld, 0.0f, dq + i0 * dq_ld, dq_ld);  // dQ = dS K
    gemm(true, false, n, D, m, 1.0f, ds, n, q_t, in.q_ld, 1.0f, dk, dk_ld);  // dK += dS^T Q
  }
}

}  // namespace meshwork::trainer
