// Linear layer without bias (at::linear(x, w)), one autograd node on meshtrain's register-blocked
// GEMM (trainer/small_gemm.h), fp32 on a CPU with AVX2 + FMA.
//
// Forward, x [M, K] (the rows of x [..., K]), w [N, K]:
//   y = x w^T,  y_mn = sum_k x_mk w_nk
//
// Backward, given dy = dL/dy [M, N]: y_mn depends on x_mk through w_nk and on w_nk through x_mk,
//   dx_mk = sum_n dy_mn w_nk   ->  dx = dy w      [M, K]
//   dw_nk = sum_m dy_mn x_mk   ->  dw = dy^T x    [N, K]
// Three products C = A B of one routine (linear_product): B is w read transposed (forward), w as
// is (dx), or x (dw, with A = dy^T). Each C element is one fixed-order sum over K: the same bits
// at any thread count.
//
// Saves x and w, as at::linear does.
#include <algorithm>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "trainer/fused_ops.h"
#include "trainer/small_gemm.h"
#include "trainer/vec_math.h"

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Scratch for packed B panels, kept per thread (grow-only, at most kPackBytes): not a tensor (as
// MKL's own packing buffers are not), so the tracked tensor bytes are those of at::linear.
constexpr int64_t kPackBytes = int64_t{8} << 20;
float* pack_buffer(int64_t floats) {
  thread_local std::vector<float> buffer;
  if (static_cast<int64_t>(buffer.size()) < floats) buffer.resize(static_cast<size_t>(floats));
  return buffer.data();
}

// C[M x N] = A[M x K] B[K x N], A(r, k) = a[r * a_row + k * a_col]; B(k, j) = src[k * ld + j]
// (rows) or src[j * ld + k] (transposed). C's columns go in groups whose packed B fits
// kPackBytes (all of N for `small`; a bounded copy, not a second weight, for large layers): each
// group's B panels are packed (split between threads), then C's 6-row blocks (split between
// threads) run over the group. Every C element is still one sum over all of K.
void linear_product(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_row, int64_t a_col,
                    const float* b_src, int64_t b_ld, bool b_transposed, float* c) {
  const int64_t panels = (N + gemm::kCols - 1) / gemm::kCols;
  const int64_t group = std::clamp<int64_t>(kPackBytes / (K * gemm::kCols * 4), 1, panels);
  float* packed = pack_buffer(group * gemm::kCols * K);
  const int64_t blocks = (M + gemm::kRows - 1) / gemm::kRows;
  const bool a_transposed = a_row == 1 && a_col > 1;
  for (int64_t g0 = 0; g0 < panels; g0 += group) {
    const int64_t c0 = g0 * gemm::kCols, cols = std::min(N, (g0 + group) * gemm::kCols) - c0;
    at::parallel_for(g0, std::min(panels, g0 + group), 4, [&](int64_t p0, int64_t p1) {
      const int64_t j0 = p0 * gemm::kCols, w = std::min(N, p1 * gemm::kCols) - j0;
      float* dst = packed + (p0 - g0) * K * gemm::kCols;
      if (b_transposed)
        gemm::pack_transposed(b_src + j0 * b_ld, b_ld, K, w, dst);
      else
        gemm::pack_rows(b_src + j0, b_ld, K, w, dst);
    });
    auto whole_depth = [&](int64_t, int64_t) { return gemm::Block{0, K, cols}; };
    at::parallel_for(0, blocks, 8, [&](int64_t b0, int64_t b1) {
      if (!a_transposed) {
        const int64_t r0 = b0 * gemm::kRows, rows = std::min(M, b1 * gemm::kRows) - r0;
        gemm::small_gemm(rows,
                         {a + r0 * a_row, a_row, a_col, packed, K * gemm::kCols, c + r0 * N + c0,
                          N, 1.0f, nullptr, false},
                         whole_depth);
        return;
      }
      // A transposed (dY^T of the weight gradient): a row block's 6 values of one k are
      // adjacent but the k are a whole row of dY apart, so every column panel would fetch K
      // cache lines again; copy the block's 6 x K values once into k-major order
      // (A(r, k) = block[k * 6 + r]), which every panel then streams.
      thread_local std::vector<float> block;
      block.resize(static_cast<size_t>(K * gemm::kRows));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r0 = b * gemm::kRows, rows = std::min<int64_t>(gemm::kRows, M - r0);
        for (int64_t k = 0; k < K; ++k)
          std::copy(a + r0 + k * a_col, a + r0 + k * a_col + rows, block.data() + k * gemm::kRows);
        gemm::small_gemm(rows,
                         {block.data(), 1, gemm::kRows, packed, K * gemm::kCols, c + r0 * N + c0,
                          N, 1.0f, nullptr, false},
                         whole_depth);
      }
    });
  }
}

// x's rows as a 2-D [M, K] view (no copy when its rows are evenly strided).
Tensor rows_2d(const Tensor& x) {
  Tensor x2 = x.reshape({-1, x.size(-1)});
  return x2.stride(1) == 1 && x2.stride(0) >= x2.size(1) ? x2 : x2.contiguous();
}

struct LinearFn : public torch::autograd::Function<LinearFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w) {
    const Tensor x2 = rows_2d(x);
    const int64_t M = x2.size(0), K = x2.size(1), N = w.size(0);
    Tensor y = at::empty({M, N}, x.options());
    // y = x w^T: B(k, j) = w[j, k].
    linear_product(M, N, K, x2.const_data_ptr<float>(), x2.stride(0), 1, w.const_data_ptr<float>(),
                   K, /*b_transposed=*/true, y.data_ptr<float>());
    ctx->save_for_backward({x, w});
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = N;
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &w = saved[1];
    const Tensor x2 = rows_2d(x), dy = rows_2d(grads[0]);
    const int64_t M = x2.size(0), K = x2.size(1), N = w.size(0);
    Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      // dX[M x K] = dY[M x N] w[N x K].
      dx = at::empty({M, K}, x.options());
      linear_product(M, K, N, dy.const_data_ptr<float>(), dy.stride(0), 1,
                     w.const_data_ptr<float>(), K, /*b_transposed=*/false, dx.data_ptr<float>());
      dx = dx.view(x.sizes());
    }
    if (ctx->needs_input_grad(1)) {
      // dW[N x K] = dY^T[N x M] x[M x K]: A(j, m) = dy[m, j].
      dw = at::empty({N, K}, w.options());
      linear_product(N, K, M, dy.const_data_ptr<float>(), 1, dy.stride(0),
                     x2.const_data_ptr<float>(), x2.stride(0), /*b_transposed=*/false,
                     dw.data_ptr<float>());
    }
    return {dx, dw};
  }
};

}  // namespace

bool fused_linear_applies(const at::Tensor& x, const at::Tensor& w) {
  return fused_ops_apply(x) && fused_ops_apply(w) && x.dim() >= 1 && w.dim() == 2 &&
         x.size(-1) == w.size(1) && x.numel() > 0 && w.is_contiguous() && cpu_has_avx2_fma();
}

at::Tensor fused_linear(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(fused_linear_applies(x, w),
              "fused_linear: fp32 CPU x [..., K] and contiguous w [N, K], on a CPU with AVX2 and FMA");
  return LinearFn::apply(x, w);
}

}  // namespace meshwork::trainer
