// Context parallelism: ring attention over the cp group with causal load balancing (the
// "zigzag" layout of Megatron-CP / torchtitan's context_parallel with load balancing).
//
// Layout: a sequence of T tokens is cut into 2cp chunks of S = T / (2cp); cp rank c holds chunks
// c and 2cp-1-c (in that order, so its T/cp local tokens have increasing positions). RoPE uses
// the tokens' global positions (cp_positions). Each rank then does the same causal work:
//
// Ring (forward): q stays; the k/v block of rank (c - j) mod cp arrives at step j (point-to-point
// send to c+1 / receive from c-1, the next block posted before the current one is computed, so
// the transfer overlaps the compute). With src the block's owner:
//   j = 0      own block: local causal mask (positions increase along the local order: tril);
//   src < c    every local query sees src's first chunk (earlier), none of its second chunk;
//   src > c    only the local second chunk (2cp-1-c, later than both of src's) sees src's block.
// So each step after the first is one unmasked S x 2S (or 2S x S) block: equal work per rank.
// Partial results merge exactly with the log-sum-exp (online softmax, Milakov & Gimelshein):
//   lse = log(e^lse_a + e^lse_b),   o = o_a e^(lse_a - lse) + o_b e^(lse_b - lse).
//
// Backward (flash-attention's recomputation): with the saved q, k, v, o and the final lse,
//   P = exp(q k^T s - lse),  dV = P^T dO,  dS = P * (dO V^T - rowsum(dO * o)),
//   dQ = dS K s,  dK = dS^T Q s   (s = 1/sqrt(D)).
// k/v travel around the ring again; the dK/dV accumulators travel with them (added to by every
// rank the block visits, then sent on), so after cp hops each block's gradient is back at its
// owner. Grouped-query attention: k/v are expanded to the q heads per block and their gradients
// summed back over each kv head's q heads.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "trainer/comm.h"
#include "trainer/model.h"

namespace meshwork::trainer {

// Indices into [0, T) of the tokens cp rank `rank` of `cp` holds (chunks rank and 2cp-1-rank).
at::Tensor cp_token_indices(int64_t seq_len, int cp, int rank);

// Causal attention of the whole sequence, computed on the cp ring. q [B, Hq, Tl, D], k/v
// [B, Hkv, Tl, D]: this rank's Tl = T / cp tokens in cp_token_indices order.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          Communicator& comm);

class ContextParallel {
 public:
  // With cp > 1 installs ring attention as the model's attention core; else does nothing.
  ContextParallel(Model& model, Communicator& comm);
  bool active() const { return cp_ > 1; }
  // This rank's tokens of [B, T] (or [B, T, ...]) sequences.
  at::Tensor shard(const at::Tensor& x) const;
  // Global RoPE positions of this rank's tokens, [T / cp] int64.
  at::Tensor positions(int64_t seq_len, at::Device device) const;

 private:
  int cp_ = 1, rank_ = 0;
};

}  // namespace meshwork::trainer
