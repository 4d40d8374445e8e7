// A register-blocked fp32 GEMM for AVX2 + FMA, header-only and raw-pointer (no LibTorch): the
// products of meshtrain's attention (trainer/attention_kernels.cpp) and, on the CPU, of its
// linear layers (trainer/ops/linear.cpp). Call only where cpu_has_avx2_fma() holds.
//
// The kernel: C[6 x 16] held in 12 AVX registers,
//   for k in [k_begin, k_end):  C[r, 0..16) += A(r, k) * B[k, 0..16)
// with A read in place through (row, column) strides, so A may be a transposed operand (P^T,
// dS^T, dY^T: then the 6 values of one k are adjacent), and B packed in panels of 16 columns
// (each panel's rows contiguous). Each row block gets its own k range and column count from the
// caller: that is where the attention skips the causal triangle. Every C element is one sum over
// its whole k range in a fixed order, so results do not depend on how rows are split between
// threads.
//
// Why not BLAS (LibTorch's MKL). For the attention's products (one side D = 32-128, causal) MKL
// packs both operands on every call and computes the masked triangle: packing and the zeroing of
// C were ~40 % of those calls' time. For the linear layers of `small` on one thread, forward and
// backward through autograd, this kernel is 1-10 % faster forward and within +-3 % backward
// (docs/trainer.md, Round 5): MKL also packs A and zeroes C before accumulating into it.

#pragma once

#include <algorithm>
#include <cstdint>

#include "trainer/vec_math.h"

namespace meshwork::trainer::gemm {

using vec::tail_mask;

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
MESHWORK_AVX2 inline void row_block(const Operands& o, int64_t r0, const Block& blk) {
  int64_t j0 = 0;
  for (; j0 + kCols <= blk.cols; j0 += kCols) register_block<MR, false>(o, r0, j0, blk);
  if (j0 < blk.cols) register_block<MR, true>(o, r0, j0, blk);
}

// k per register-block pass: a long k range is summed in passes of this depth, each added to C
// (as BLAS blocks k): one running sum over k = 8192 in a register was ~8x less accurate than
// MKL's; in passes of 256 it is on a par. A B panel's pass (256 x 16 floats) also stays in L1.
constexpr int64_t kDepth = 256;

// C rows [0, m): blocks(r0, rows) gives row block r0's k range and columns. The passes over k run
// in order, so every C element is the same fixed-order sum whatever splits the rows.
template <typename Blocks>
inline void small_gemm(int64_t m, const Operands& o, const Blocks& blocks) {
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, m - r0);
    const Block blk = blocks(r0, rows);
    Operands pass = o;
    for (int64_t kb = blk.k_begin;; kb += kDepth) {
      // An empty range still runs once: it writes C = 0 (or leaves C + 0).
      const Block part{kb, std::min(blk.k_end, kb + kDepth), blk.cols};
      switch (rows) {
        case 6: row_block<6>(pass, r0, part); break;
        case 5: row_block<5>(pass, r0, part); break;
        case 4: row_block<4>(pass, r0, part); break;
        case 3: row_block<3>(pass, r0, part); break;
        case 2: row_block<2>(pass, r0, part); break;
        default: row_block<1>(pass, r0, part); break;
      }
      if (part.k_end >= blk.k_end) break;
      pass.accumulate = true;
    }
  }
}

inline int64_t round_up(int64_t x) { return (x + kCols - 1) / kCols * kCols; }

// Panels of B(k, j) = src[k * ld + j], k < rows, j < cols (a head's rows as the k side: V, K,
// dO, Q); the panel stride is rows * 16.
inline void pack_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, float* dst) {
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
inline void pack_transposed(const float* src, int64_t ld, int64_t depth, int64_t cols,
                            float* dst) {
  for (int64_t j0 = 0; j0 < cols; j0 += kCols) {
    const int64_t w = std::min<int64_t>(kCols, cols - j0);
    float* panel = dst + (j0 / kCols) * depth * kCols;
    for (int64_t k = 0; k < depth; ++k) {
      for (int64_t jj = 0; jj < w; ++jj) panel[k * kCols + jj] = src[(j0 + jj) * ld + k];
      std::fill(panel + k * kCols + w, panel + (k + 1) * kCols, 0.0f);
    }
  }
}

}  // namespace meshwork::trainer::gemm
