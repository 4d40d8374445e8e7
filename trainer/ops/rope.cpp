// Rotary position embedding (HF Llama's rotate-half form), one autograd node.
//
// Forward, per row x of D = 2h elements at position t, cos/sin [T, D] (c = cos[t], s = sin[t]):
//   rotate_half(x) = cat(-x[h:], x[:h])
//   y = x c + rotate_half(x) s, that is
//   y_j = x_j c_j - x_{j+h} s_j      (j < h)
//   y_j = x_j c_j + x_{j-h} s_j      (j >= h)
// (HF's cos/sin repeat one half: c_j = c_{j+h}, s_j = s_{j+h}, so each pair (x_j, x_{j+h}) is
// rotated by the angle t theta_j.)
//
// Backward: y = A x is linear in x, so dx = A^T gy. x_j (j < h) enters y_j with c_j and
// y_{j+h} with +s_{j+h}; x_j (j >= h) enters y_j with c_j and y_{j-h} with -s_{j-h}:
//   dx_j = gy_j c_j + gy_{j+h} s_{j+h}   (j < h)
//   dx_j = gy_j c_j - gy_{j-h} s_{j-h}   (j >= h)
// (the rotation by -t theta_j). Nothing of x is saved: only cos and sin.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "trainer/fused_ops.h"
#include "trainer/ops/rows.h"

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Walks the rows of x seen as [B, T, Hh, D] (D contiguous) and writes `out` [B, T, Hh, D]
// contiguous: y = x cos + rotate_half(x) sin (forward), or its transpose (kBackward).
template <bool kBackward>
void rope_rows(const Tensor& x_bthd, const Tensor& cos, const Tensor& sin, Tensor& out) {
  const int64_t T = x_bthd.size(1), Hh = x_bthd.size(2), D = x_bthd.size(3);
  const int64_t h = D / 2;
  const int64_t s0 = x_bthd.stride(0), s1 = x_bthd.stride(1), s2 = x_bthd.stride(2);
  const float* xp = x_bthd.const_data_ptr<float>();
  const float* cp = cos.const_data_ptr<float>();
  const float* sp = sin.const_data_ptr<float>();
  float* op = out.data_ptr<float>();
  ops::parallel_rows(x_bthd.size(0) * T, Hh * D, [&](int64_t bt) {
    const int64_t bi = bt / T, t = bt % T;
    const float* c = cp + t * D;
    const float* s = sp + t * D;
    for (int64_t hh = 0; hh < Hh; ++hh) {
      const float* x = xp + bi * s0 + t * s1 + hh * s2;
      float* o = op + (bt * Hh + hh) * D;
      if constexpr (!kBackward) {
        for (int64_t j = 0; j < h; ++j) o[j] = x[j] * c[j] + (-x[j + h]) * s[j];
        for (int64_t j = h; j < D; ++j) o[j] = x[j] * c[j] + x[j - h] * s[j];
      } else {
        for (int64_t j = 0; j < h; ++j) o[j] = x[j] * c[j] + x[j + h] * s[j + h];
        for (int64_t j = h; j < D; ++j) o[j] = x[j] * c[j] + (-x[j - h]) * s[j - h];
      }
    }
  });
}

Tensor rope_apply(const Tensor& x_bhtd, const Tensor& cos, const Tensor& sin, bool backward) {
  Tensor x = x_bhtd.transpose(1, 2);  // [B, T, Hh, D] view
  if (x.stride(3) != 1) x = x.contiguous();
  Tensor out = at::empty(x.sizes(), x.options());
  if (backward) rope_rows<true>(x, cos, sin, out);
  else rope_rows<false>(x, cos, sin, out);
  return out.transpose(1, 2);
}

struct RopeFn : public torch::autograd::Function<RopeFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& cos, const Tensor& sin) {
    Tensor c = cos.contiguous(), s = sin.contiguous();
    ctx->save_for_backward({c, s});
    return rope_apply(x, c, s, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    return {rope_apply(grads[0], saved[0], saved[1], true), Tensor(), Tensor()};
  }
};

}  // namespace

at::Tensor fused_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0 && cos.size(0) == x.size(2) &&
                  cos.size(1) == x.size(3),
              "fused_rope: x [B, H, T, D] with even D and cos/sin [T, D]");
  return RopeFn::apply(x, cos, sin);
}

}  // namespace meshwork::trainer
