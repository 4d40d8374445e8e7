#include "trainer/attention_kernels.h"

#include <algorithm>
#include <cmath>

#include "trainer/small_gemm.h"
#include "trainer/vec_math.h"

namespace meshwork::trainer {
namespace {

using vec::exp_nonpositive;
using vec::hmax;
using vec::hsum;
using vec::tail_mask;

using namespace gemm;

// Columns a score tile's row block needs: keys up to its last row (absolute row i0 + r0 + rows
// - 1), rounded up to whole register blocks (the extra scores are ignored: the row passes only
// read a row's causal keys and write zeros after them).
int64_t causal_cols(int64_t i0, int64_t r0, int64_t rows, int64_t n) {
  const int64_t need = i0 + r0 + rows;
  return std::min(n, (need + kCols - 1) / kCols * kCols);
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

// dp[0, valid) = p (dp - delta) scale, zeros on [valid, n) (dp there was never computed, and
// the dQ and dK products read those zeros).
MESHWORK_AVX2 void score_grad_row(const float* p, float* dp, int64_t valid, int64_t n, float delta,
                                  float scale) {
  const __m256 vd = _mm256_set1_ps(delta), vs = _mm256_set1_ps(scale);
  const int64_t full = valid & ~int64_t{7};
  for (int64_t j = 0; j < full; j += 8) {
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd));
    _mm256_storeu_ps(dp + j, _mm256_mul_ps(g, vs));
  }
  for (int64_t j = full; j < valid; ++j) dp[j] = p[j] * (dp[j] - delta) * scale;
  std::fill(dp + valid, dp + n, 0.0f);
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

}  // namespace

// Scratch, in floats. Forward: the score tile (64 x T), K^T packed (round_up(T) x D), V packed
// (T x round_up(D)). Backward: the P and dS tiles (64 x T each), K^T and V^T packed
// (round_up(T) x D each), K packed (T x round_up(D)), a tile of dO and of Q (64 x round_up(D) each).
int64_t attention_forward_scratch(int64_t T, int64_t D) {
  return kAttentionTileRows * T + round_up(T) * D + T * round_up(D);
}
int64_t attention_backward_scratch(int64_t T, int64_t D) {
  return 2 * kAttentionTileRows * T + 2 * round_up(T) * D + T * round_up(D) +
         2 * kAttentionTileRows * round_up(D);
}

void attention_head_forward(int64_t T, int64_t D, const HeadPtrs& in, float* out, int64_t out_ld,
                            float* lse, float* scratch) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  float* s = scratch;
  float* kt = s + kAttentionTileRows * T;  // B = K^T for S
  float* vp = kt + round_up(T) * D;        // B = V for O
  pack_transposed(in.k, in.k_ld, D, T, kt);
  pack_rows(in.v, in.v_ld, T, D, vp);
  for (int64_t i0 = 0; i0 < T; i0 += kAttentionTileRows) {
    // Tile rows [i0, i0 + m) attend to keys [0, n): the causal edge of the tile's last row.
    const int64_t m = std::min(kAttentionTileRows, T - i0), n = i0 + m;
    // S = scale Q K^T, each row block up to its causal edge.
    small_gemm(m, {in.q + i0 * in.q_ld, in.q_ld, 1, kt, D * kCols, s, n, scale, nullptr, false},
               [&](int64_t r0, int64_t rows) { return Block{0, D, causal_cols(i0, r0, rows, n)}; });
    float inv_sum[kAttentionTileRows];
    for (int64_t r = 0; r < m; ++r) lse[i0 + r] = softmax_row(s + r * n, i0 + r + 1, n, &inv_sum[r]);
    // O = diag(1 / sum) exp(S - max) V, over each row block's causal keys.
    small_gemm(m, {s, n, 1, vp, T * kCols, out + i0 * out_ld, out_ld, 1.0f, inv_sum, false},
               [&](int64_t r0, int64_t rows) { return Block{0, std::min(n, i0 + r0 + rows), D}; });
  }
}

void attention_head_backward(int64_t T, int64_t D, const HeadPtrs& in, const float* out,
                             int64_t out_ld, const float* dout, int64_t dout_ld, const float* lse,
                             float* dq, int64_t dq_ld, float* dk, int64_t dk_ld, float* dv,
                             int64_t dv_ld, float* scratch) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  float* p = scratch;
  float* ds = p + kAttentionTileRows * T;
  float* kt = ds + kAttentionTileRows * T;  // B = K^T for S
  float* vt = kt + round_up(T) * D;         // B = V^T for dP
  float* kp = vt + round_up(T) * D;         // B = K for dQ
  float* dop = kp + T * round_up(D);        // B = the tile's dO for dV
  float* qp = dop + kAttentionTileRows * round_up(D);  // B = the tile's Q for dK
  pack_transposed(in.k, in.k_ld, D, T, kt);
  pack_transposed(in.v, in.v_ld, D, T, vt);
  pack_rows(in.k, in.k_ld, T, D, kp);
  for (int64_t i0 = 0; i0 < T; i0 += kAttentionTileRows) {
    const int64_t m = std::min(kAttentionTileRows, T - i0), n = i0 + m;
    const float* q_t = in.q + i0 * in.q_ld;
    const float* do_t = dout + i0 * dout_ld;
    pack_rows(do_t, dout_ld, m, D, dop);
    pack_rows(q_t, in.q_ld, m, D, qp);
    auto score_blocks = [&](int64_t r0, int64_t rows) {
      return Block{0, D, causal_cols(i0, r0, rows, n)};
    };
    // Products over a query row block's causal keys (k = key).
    auto key_prefix = [&](int64_t r0, int64_t rows) {
      return Block{0, std::min(n, i0 + r0 + rows), D};
    };
    // Products into key rows [r0, r0 + rows) over the tile's query rows that see them
    // (k = tile row, query i0 + k >= key r0).
    auto query_suffix = [&](int64_t r0, int64_t) {
      return Block{std::max<int64_t>(0, r0 - i0), m, D};
    };
    small_gemm(m, {q_t, in.q_ld, 1, kt, D * kCols, p, n, scale, nullptr, false}, score_blocks);
    for (int64_t r = 0; r < m; ++r) probabilities_row(p + r * n, i0 + r + 1, n, lse[i0 + r]);
    small_gemm(n, {p, 1, n, dop, m * kCols, dv, dv_ld, 1.0f, nullptr, true}, query_suffix);  // dV += P^T dO
    small_gemm(m, {do_t, dout_ld, 1, vt, D * kCols, ds, n, 1.0f, nullptr, false}, score_blocks);  // dP = dO V^T
    for (int64_t r = 0; r < m; ++r) {
      const float delta = dot(do_t + r * dout_ld, out + (i0 + r) * out_ld, D);
      score_grad_row(p + r * n, ds + r * n, i0 + r + 1, n, delta, scale);  // dS (scaled)
    }
    small_gemm(m, {ds, n, 1, kp, T * kCols, dq + i0 * dq_ld, dq_ld, 1.0f, nullptr, false},
               key_prefix);  // dQ = dS K
    small_gemm(n, {ds, 1, n, qp, m * kCols, dk, dk_ld, 1.0f, nullptr, true}, query_suffix);  // dK += dS^T Q
  }
}

}  // namespace meshwork::trainer
