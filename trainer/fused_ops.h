// Fused element-wise pieces of the decoder block and of the optimizer (CPU, fp32), each one autograd node with one
// pass over its data forward and one backward, where the composite versions run 5-10 ATen
// kernels (each a pass over memory and, with several threads, an OpenMP fork/join) and
// allocate a temporary per kernel. Profiled on `small` (docs/trainer.md): the element-wise ops
// around the GEMMs took about a quarter of a step.
//
// Same maths as the composite definitions (model.cpp keeps them for other dtypes and devices,
// and tests/trainer/trainer_parts_test.cpp checks both agree, forward and backward):
//   rms_norm(x, w)   = x * rsqrt(mean(x^2, -1) + eps) * w          (HF Llama, fp32 statistics)
//   rope(x, cos, sin) = x * cos + rotate_half(x) * sin              (HF Llama rotate-half)
//   swiglu(gu)       = silu(gu[..., :I]) * gu[..., I:]              (gate and up in one tensor)
// They save as many bytes as the composite versions save (the memory estimate in core counts
// those), and every output element is computed by the same arithmetic whatever the
// thread count or the row's position, so shards and the whole agree bit for bit.
//
// One op per file in trainer/ops/, each opening with its forward and backward maths:
// rms_norm.cpp, rope.cpp, swiglu.cpp, causal_attention.cpp, linear.cpp, adamw.cpp and
// sum_squares.cpp (the gradient norm's part); trainer/ops/rows.h holds their shared row loops.
#pragma once

#include <ATen/ATen.h>

namespace meshwork::trainer {

// True when the fused kernels apply to `t` (fp32 on CPU); other dtypes/devices use the
// composite ops.
inline bool fused_ops_apply(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat;
}

// x [..., H] (any layout), w [H]. The statistics are accumulated in double.
at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);

// x [B, Hh, T, D] (any strides; typically a transposed view of a projection), cos/sin [T, D].
// Returns [B, Hh, T, D] laid out as [B, T, Hh, D] in memory, as the composite ops do.
at::Tensor fused_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// gu [..., 2I] (gate then up) -> [..., I]. Saves sigmoid(gate) (not silu(gate): same size) so
// that the backward is one exp-free pass writing the gate and up gradients into one [..., 2I]
// tensor (no concatenation of two halves).
at::Tensor fused_swiglu(const at::Tensor& gu);

// Causal attention (HF Llama's sdpa with is_causal, scale 1/sqrt(D)) for q [B, Hq, T, D] and
// k, v [B, Hkv, T, D], Hq a multiple of Hkv (grouped-query: kv head g serves query heads
// g*Hq/Hkv ..), rows of D contiguous (any other strides). Returns [B, Hq, T, D] laid out as
// [B, T, Hq, D]. Saves q, k, v, the output and one log-sum-exp per row, as flash attention does
// (core's memory estimate counts those). Kernels and their maths: trainer/attention_kernels.h.
bool fused_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// y = x w^T (at::linear without bias) for fp32 CPU x [..., K] whose rows are contiguous and w
// [N, K] contiguous, on a CPU with AVX2 + FMA: the forward and both backward products (dX = dY w,
// dW = dY^T x) on meshtrain's register-blocked GEMM (trainer/small_gemm.h), rows split between
// threads. Saves x and w, as at::linear does. Each output element is one fixed-order sum: the
// same bits at any thread count.
bool fused_linear_applies(const at::Tensor& x, const at::Tensor& w);
at::Tensor fused_linear(const at::Tensor& x, const at::Tensor& w);

// AdamW on contiguous fp32 CPU tensors in one pass (p, g, m, v read once, p, m, v written
// once), with the gradient multiplied by grad_scale on the fly (clipping):
//   g' = g s;  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//   p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v / bc2) + eps)
// Every element goes through the same float operations whatever its position or the thread
// count, so a shard updates exactly as the same elements of the full tensor.
void fused_adamw_(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, double lr,
                  double beta1, double beta2, double eps, double weight_decay, double bc1,
                  double bc2, double grad_scale);

// Sum of the squares of a contiguous fp32 CPU tensor, accumulated in double: one read of the
// data (the composite g.pow(2).sum(kDouble) writes the squares, then converts them to a double
// copy before summing). Fixed chunks summed in order: the same bits whatever the thread count.
double fused_sum_squares(const at::Tensor& t);

}  // namespace meshwork::trainer
