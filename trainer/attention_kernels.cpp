#include "trainer/attention_kernels.h"

#include <algorithm>
#include <cmath>

#include "trainer/vec_math.h"

namespace meshwork::trainer {
namespace {

using vec::exp_nonpositive;
using vec::hmax;
using vec::hsum;
using vec::tail_mask;

// ---------------------------------------------------------------- small GEMM
//
// Every product here has one side of D (32-128) and causal structure: row block r of a score
// tile needs the keys up to its last row only, and a key's gradient only the query rows at or
// after it. BLAS (MKL) sees neither: it packs both operands on every call (the packing and the
// zeroing of C were ~40 % of these calls' time at D = 32) and computes the masked triangle. So
// the products are one register-blocked kernel: C[6 x 16] held in 12 AVX registers,
//   for k in [k_begin, k_end):  C[r, 0..16) += A(r, k) * B[k, 0..16)
// with A read in place through (row, column) strides, so A may be a transposed operand (P^T,
// dS^T: then the 6 values of one k are adjacent), and B packed in panels of 16 columns (each
// panel's rows contiguous: a head's rows are strided by the whole fused projection, and K^T's
// rows by T, which for T a multiple of 1024 puts every row in one L1 set). Each row block gets
// its own k range and column count from the caller: that is where the causal skipping happens.

constexpr int kRows = 6;   // C rows per register block
constexpr int kCols = 16;  // C columns per register block and B panel width

struct Block {
  int64_t k_begin, k_end, cols;
};

struct Operands {
  const float* a;
  int64_t a_row, a_col;  // A(r, k) = a[r * a_row + k * a_col]
  const float* b;
  int64_t panel;  // B(k, j) = b[(j / 16) * panel + k * 16 + j % 16]
  float* c;
  int64_t ldc;
  float alpha;
  const float* row_scale;  // when set, row r is scaled by row_scale[r] instead of alpha
  bool accumulate;         // C += product, else C = product
};

template <int MR, bool kTail>
MESHWORK_AVX2 inline void register_block(const Operands& o, int64_t r0, int64_t j0,
                                         const Block& blk) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const int64_t a_row = o.a_row, a_col = o.a_col;
  const float* ak = o.a + r0 * a_row + blk.k_begin * a_col;
  const float* bk = o.b + (j0 / kCols) * o.panel + blk.k_begin * kCols;
  for (int64_t k = blk.k_begin; k < blk.k_end; ++k, ak += a_col, bk += kCols) {
    const __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(ak + r * a_row);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  // Panels are zero-padded to 16 columns; only the stores of a last partial block are masked.
  const int64_t nc = std::min<int64_t>(kCols, blk.cols - j0);
  const __m256i m0 = tail_mask(std::min<int64_t>(nc, 8)), m1 = tail_mask(std::max<int64_t>(nc - 8, 0));
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const __m256 scale = _mm256_set1_ps(o.row_scale ? o.row_scale[r0 + r] : o.alpha);
    float* c = o.c + (r0 + r) * o.ldc + j0;
    __m256 c0 = _mm256_mul_ps(acc[r][0], scale), c1 = _mm256_mul_ps(acc[r][1], scale);
    if constexpr (kTail) {
      if (o.accumulate) {
        c0 = _mm256_add_ps(c0, _mm256_maskload_ps(c, m0));
        c1 = _mm256_add_ps(c1, _mm256_maskload_ps(c + 8, m1));
      }
      _mm256_maskstore_ps(c, m0, c0);
      _mm256_maskstore_ps(c + 8, m1, c1);
    } else {
      if (o.accumulate) {
        c0 = _mm256_add_ps(c0, _mm256_loadu_ps(c));
        c1 = _mm256_add_ps(c1, _mm256_loadu_ps(c + 8));
      }
      _mm256_storeu_ps(c, c0);
      _mm256_storeu_ps(c + 8, c1);
    }
  }
}

template <int MR>
MESHWORK_AVX2 void row_block(const Operands& o, int64_t r0, const Block& blk) {
  int64_t j0 = 0;
  for (; j0 + kCols <= blk.cols; j0 += kCols) register_block<MR, false>(o, r0, j0, blk);
  if (j0 < blk.cols) register_block<MR, true>(o, r0, j0, blk);
}

// C rows [0, m): blocks(r0, rows) gives row block r0's k range and columns.
template <typename Blocks>
void small_gemm(int64_t m, const Operands& o, const Blocks& blocks) {
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, m - r0);
    const Block blk = blocks(r0, rows);
    switch (rows) {
      case 6: row_block<6>(o, r0, blk); break;
      case 5: row_block<5>(o, r0, blk); break;
      case 4: row_block<4>(o, r0, blk); break;
      case 3: row_block<3>(o, r0, blk); break;
      case 2: row_block<2>(o, r0, blk); break;
      default: row_block<1>(o, r0, blk); break;
    }
  }
}

int64_t round_up(int64_t x) { return (x + kCols - 1) / kCols * kCols; }

// Panels of B(k, j) = src[k * ld + j], k < rows, j < cols (a head's rows as the k side: V, K,
// dO, Q); the panel stride is rows * 16.
void pack_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, float* dst) {
  for (int64_t j0 = 0; j0 < cols; j0 += kCols) {
    const int64_t w = std::min<int64_t>(kCols, cols - j0);
    float* panel = dst + (j0 / kCols) * rows * kCols;
    for (int64_t k = 0; k < rows; ++k) {
      std::copy(src + k * ld + j0, src + k * ld + j0 + w, panel + k * kCols);
      std::fill(panel + k * kCols + w, panel + (k + 1) * kCols, 0.0f);
    }
  }
}

// Panels of B(k, j) = src[j * ld + k], k < depth, j < cols (K^T, V^T: keys as columns); the
// panel stride is depth * 16.
void pack_transposed(const float* src, int64_t ld, int64_t depth, int64_t cols, float* dst) {
  for (int64_t j0 = 0; j0 < cols; j0 += kCols) {
    const int64_t w = std::min<int64_t>(kCols, cols - j0);
    float* panel = dst + (j0 / kCols) * depth * kCols;
    for (int64_t k = 0; k < depth; ++k) {
      for (int64_t jj = 0; jj < w; ++jj) panel[k * kCols + jj] = src[(j0 + jj) * ld + k];
      std::fill(panel + k * kCols + w, panel + (k + 1) * kCols, 0.0f);
    }
  }
}

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

// Scratch layout, in floats: a score tile (64 x T), and the packed operands: K^T and V^T
// (round_up(T) x D each), K and V (T x round_up(D) each), a tile of dO and of Q (64 x round_up(D)).
int64_t attention_forward_scratch(int64_t T, int64_t D) {
  return kAttentionTileRows * T + round_up(T) * D + T * round_up(D);
}
int64_t attention_backward_scratch(int64_t T, int64_t D) {
  return 2 * kAttentionTileRows * T + 2 * round_up(T) * D + 2 * T * round_up(D) +
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
