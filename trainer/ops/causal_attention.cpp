// Causal attention (HF Llama's sdpa with is_causal, scale 1/sqrt(D)), grouped-query, one
// autograd node over meshtrain's own row kernels (trainer/attention_kernels.h).
//
// Forward, per head, query row i against keys j <= i, s = 1/sqrt(D):
//   S_ij = s q_i . k_j
//   lse_i = log sum_{j<=i} exp(S_ij)
//   P_ij = exp(S_ij - lse_i)                     (softmax over j)
//   o_i = sum_j P_ij v_j
//
// Backward, given dO:
//   dV_j = sum_i P_ij dO_i
//   dP_ij = dO_i . v_j
//   softmax: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik), and
//     sum_k P_ik dP_ik = dO_i . sum_k P_ik v_k = dO_i . o_i =: Delta_i
//   so dS_ij = P_ij (dP_ij - Delta_i)
//   dQ_i = s sum_j dS_ij k_j
//   dK_j = s sum_i dS_ij q_i
// With grouped-query attention kv head g serves query heads g*Hq/Hkv ..: its dK and dV are the
// sums over those query heads.
//
// Saves q, k, v, o and lse (as flash attention does; core's memory estimate counts those); the
// backward recomputes P from lse.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "trainer/attention_kernels.h"
#include "trainer/fused_ops.h"
#include "trainer/vec_math.h"

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// A head's rows: pointer of (batch b, head h) in a [B, H, T, D] tensor whose rows of D are
// contiguous, and the distance between rows.
const float* head_rows(const Tensor& t, int64_t b, int64_t h) {
  return t.const_data_ptr<float>() + b * t.stride(0) + h * t.stride(1);
}
float* head_rows_mut(Tensor& t, int64_t b, int64_t h) {
  return t.data_ptr<float>() + b * t.stride(0) + h * t.stride(1);
}
Tensor rows_contiguous(const Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); }

// Runs fn(b, g, h, pointers of q/k/v head rows, scratch) for every query head h of every batch
// b, one task per (batch, kv head g): the task runs the kv head's query heads in turn, so the kv
// head's gradients are accumulated by one thread (no per-thread copies to reduce).
template <typename Fn>
void for_each_head(const Tensor& q, const Tensor& k, const Tensor& v, int64_t scratch_floats,
                   const Fn& fn) {
  const int64_t Hq = q.size(1), Hkv = k.size(1), rep = Hq / Hkv;
  at::parallel_for(0, q.size(0) * Hkv, 1, [&](int64_t first, int64_t last) {
    Tensor scratch = at::empty({scratch_floats}, q.options());
    for (int64_t task = first; task < last; ++task) {
      const int64_t b = task / Hkv, g = task % Hkv;
      for (int64_t h = g * rep; h < (g + 1) * rep; ++h) {
        const HeadPtrs in{head_rows(q, b, h), q.stride(2), head_rows(k, b, g), k.stride(2),
                          head_rows(v, b, g), v.stride(2)};
        fn(b, g, h, in, scratch.data_ptr<float>());
      }
    }
  });
}

struct CausalAttentionFn : public torch::autograd::Function<CausalAttentionFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q_in, const Tensor& k_in,
                        const Tensor& v_in) {
    Tensor q = rows_contiguous(q_in), k = rows_contiguous(k_in), v = rows_contiguous(v_in);
    const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3);
    // [B, T, Hq, D] in memory: the projection after attention reads it without a copy.
    Tensor out = at::empty({B, T, Hq, D}, q.options()).transpose(1, 2);
    Tensor lse = at::empty({B, Hq, T}, q.options());
    for_each_head(q, k, v, attention_forward_scratch(T, D),
                  [&](int64_t b, int64_t, int64_t h, const HeadPtrs& in, float* scratch) {
                    attention_head_forward(T, D, in, head_rows_mut(out, b, h), out.stride(2),
                                           lse.data_ptr<float>() + (b * Hq + h) * T, scratch);
                  });
    ctx->save_for_backward({q, k, v, out, lse});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const Tensor dout = rows_contiguous(grads[0]);
    const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3), Hkv = k.size(1);
    Tensor dq = at::empty({B, T, Hq, D}, q.options()).transpose(1, 2);
    Tensor dk = at::zeros({B, T, Hkv, D}, q.options()).transpose(1, 2);
    Tensor dv = at::zeros({B, T, Hkv, D}, q.options()).transpose(1, 2);
    for_each_head(q, k, v, attention_backward_scratch(T, D),
                  [&](int64_t b, int64_t g, int64_t h, const HeadPtrs& in, float* scratch) {
                    attention_head_backward(
                        T, D, in, head_rows(out, b, h), out.stride(2), head_rows(dout, b, h),
                        dout.stride(2), lse.const_data_ptr<float>() + (b * Hq + h) * T,
                        head_rows_mut(dq, b, h), dq.stride(2), head_rows_mut(dk, b, g),
                        dk.stride(2), head_rows_mut(dv, b, g), dv.stride(2), scratch);
                  });
    return {dq, dk, dv};
  }
};

}  // namespace

bool fused_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return fused_ops_apply(q) && fused_ops_apply(k) && fused_ops_apply(v) && q.dim() == 4 &&
         k.dim() == 4 && v.sizes() == k.sizes() && q.size(0) == k.size(0) &&
         q.size(2) == k.size(2) && q.size(3) == k.size(3) && k.size(1) > 0 &&
         q.size(1) % k.size(1) == 0 && cpu_has_avx2_fma();
}

at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(fused_attention_applies(q, k, v),
              "fused_causal_attention: fp32 CPU q [B, Hq, T, D], k and v [B, Hkv, T, D] with Hq a "
              "multiple of Hkv, on a CPU with AVX2 and FMA");
  return CausalAttentionFn::apply(q, k, v);
}

}  // namespace meshwork::trainer
