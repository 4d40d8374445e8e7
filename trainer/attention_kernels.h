// Causal attention of one query head against its key/value head, fp32 on CPU, on raw pointers
// (no LibTorch here: trainer/ops/causal_attention.cpp wraps these in an autograd Function and
// runs one task per (batch, kv head) in parallel). The row passes use AVX2 + FMA: call these only
// where cpu_has_avx2_fma() (trainer/vec_math.h) holds.
//
// Why not ATen's flash attention: with Llama's small head dims (32-128) its block GEMMs are thin
// and its per-block bookkeeping (online-softmax rescaling, per-thread gradient buffers reduced at
// the end) dominates. Here each tile of query rows sees all of its causal keys at once, so the
// softmax is exact in one pass (no rescaling); the two forward and five backward products of a
// tile run on a register-blocked kernel that stops each 6-row block at its causal edge. The
// timings against flash attention, MKL and this kernel are in docs/trainer.md (rounds 4 and 5).
//
// Maths (row i of one head, keys j <= i, s = 1/sqrt(D)):
//   S_ij = s q_i.k_j,  P_ij = exp(S_ij - lse_i),  lse_i = log sum_j exp(S_ij),  o_i = sum_j P_ij v_j
// backward, with dO given and Delta_i = dO_i . o_i:
//   dV_j += sum_i P_ij dO_i,  dP_ij = dO_i . v_j,  dS_ij = P_ij (dP_ij - Delta_i),
//   dQ_i = s sum_j dS_ij k_j,  dK_j += s sum_i dS_ij q_i.
// Forward keeps only o and lse (as flash attention does); backward recomputes P from lse.
#pragma once

#include <cstdint>

namespace meshwork::trainer {

// Rows of every matrix are D contiguous floats; *_ld is the distance between rows in floats.
struct HeadPtrs {
  const float* q;
  int64_t q_ld;
  const float* k;
  int64_t k_ld;
  const float* v;
  int64_t v_ld;
};

// Query rows per tile: the score tile (rows x T floats) stays in L2 between the products that
// write and read it. Inside a tile each 6-row block computes only up to its own causal edge.
constexpr int64_t kAttentionTileRows = 64;

// Floats of scratch one head's forward needs (S tile, packed K^T and V), and its backward (S and
// dP tiles, packed K^T, V^T, K and a tile of dO and Q).
int64_t attention_forward_scratch(int64_t T, int64_t D);
int64_t attention_backward_scratch(int64_t T, int64_t D);

// out rows (out_ld apart) and lse[T] of one head.
void attention_head_forward(int64_t T, int64_t D, const HeadPtrs& in, float* out, int64_t out_ld,
                            float* lse, float* scratch);

// dq is written (not accumulated); dk and dv are accumulated into, so a kv head shared by several
// query heads sums their contributions (zero them first).
void attention_head_backward(int64_t T, int64_t D, const HeadPtrs& in, const float* out,
                             int64_t out_ld, const float* dout, int64_t dout_ld, const float* lse,
                             float* dq, int64_t dq_ld, float* dk, int64_t dk_ld, float* dv,
                             int64_t dv_ld, float* scratch);

}  // namespace meshwork::trainer
