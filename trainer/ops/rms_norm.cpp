// RMSNorm (HF Llama, fp32 statistics accumulated in double), one autograd node.
//
// Forward, per row x of H elements, weight w [H]:
//   r = 1 / sqrt(mean_i(x_i^2) + eps)
//   xhat_j = x_j r
//   y_j = w_j xhat_j
//
// Backward, given gy = dL/dy:
//   dw_j = sum over rows of gy_j xhat_j
//   dL/dx_j = sum_i gy_i w_i dxhat_i/dx_j, with
//     dxhat_i/dx_j = r [i == j] + x_i dr/dx_j
//     dr/dx_j = -1/2 (mean(x^2) + eps)^(-3/2) * 2 x_j / H = -r^3 x_j / H
//   so dx_j = r gy_j w_j - (r^3 x_j / H) sum_i gy_i w_i x_i
//           = r (gy_j w_j - xhat_j mean_i(gy_i w_i xhat_i))
// One row's backward is one dot product (in double, fixed order) and one pass.
//
// Saves x, xhat, r and w: the tensors the composite version's autograd keeps (core's memory
// estimate counts x and xhat per norm), so memory is unchanged; one pass each way.
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "trainer/fused_ops.h"
#include "trainer/ops/rows.h"

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, double eps) {
    Tensor xc = x.contiguous(), wc = w.contiguous();
    const int64_t H = xc.size(-1), N = xc.numel() / H;
    Tensor xhat = at::empty(xc.sizes(), xc.options());
    Tensor y = at::empty(xc.sizes(), xc.options());
    Tensor rstd = at::empty({N}, xc.options());
    const float* xp = xc.const_data_ptr<float>();
    const float* wp = wc.const_data_ptr<float>();
    float* hp = xhat.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    float* rp = rstd.data_ptr<float>();
    ops::parallel_rows(N, H, [&](int64_t r) {
      const float* xr = xp + r * H;
      const double ss = ops::row_dot(xr, xr, nullptr, H);
      const float rs = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(H) + eps));
      rp[r] = rs;
      float* hr = hp + r * H;
      float* yr = yp + r * H;
      for (int64_t j = 0; j < H; ++j) {
        hr[j] = xr[j] * rs;
        yr[j] = hr[j] * wp[j];
      }
    });
    ctx->save_for_backward({xc, xhat, rstd, wc});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor& xhat = saved[1];
    const Tensor& rstd = saved[2];
    const Tensor& w = saved[3];
    Tensor gy = grads[0].contiguous();
    const int64_t H = xhat.size(-1), N = xhat.numel() / H;
    Tensor gx = at::empty(xhat.sizes(), xhat.options());
    const float* gp = gy.const_data_ptr<float>();
    const float* hp = xhat.const_data_ptr<float>();
    const float* rp = rstd.const_data_ptr<float>();
    const float* wp = w.const_data_ptr<float>();
    float* gxp = gx.data_ptr<float>();
    // dx = r (gy w - xhat m), m = mean(gy w xhat).
    ops::parallel_rows(N, H, [&](int64_t r) {
      const float* gr = gp + r * H;
      const float* hr = hp + r * H;
      const double dot = ops::row_dot(gr, wp, hr, H);
      const float m = static_cast<float>(dot / static_cast<double>(H));
      const float rs = rp[r];
      float* o = gxp + r * H;
      for (int64_t j = 0; j < H; ++j) o[j] = rs * (gr[j] * wp[j] - hr[j] * m);
    });
    // Weight gradient: split by columns, every column summed over rows in row order, so the
    // result does not depend on the thread count.
    Tensor gw = at::empty({H}, xhat.options());
    float* gwp = gw.data_ptr<float>();
    at::parallel_for(0, H, std::max<int64_t>(1, H / 8), [&](int64_t b, int64_t e) {
      std::vector<double> acc(static_cast<size_t>(e - b), 0.0);
      for (int64_t r = 0; r < N; ++r) {
        const float* gr = gp + r * H;
        const float* hr = hp + r * H;
        for (int64_t j = b; j < e; ++j) acc[j - b] += static_cast<double>(gr[j] * hr[j]);
      }
      for (int64_t j = b; j < e; ++j) gwp[j] = static_cast<float>(acc[j - b]);
    });
    return {gx, gw, Tensor()};
  }
};

}  // namespace

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return RmsNormFn::apply(x, w, eps);
}

}  // namespace meshwork::trainer
