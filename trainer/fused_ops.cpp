#include "trainer/fused_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "trainer/attention_kernels.h"
#include "trainer/small_gemm.h"
#include "trainer/vec_math.h"

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Rows per task: enough work per task that a fork/join pays for itself (~32k elements).
int64_t grain_rows(int64_t row_len) { return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, row_len)); }

// sum_j double(a_j * b_j) * c_j (c = nullptr: sum_j double(a_j) * b_j) with four independent
// double sums in a fixed order: one dependent chain of double adds is latency-bound (~4 cycles an
// element, ~1,000 cycles a row of 256); four keep the adder busy. The order never depends on the
// row's position or the thread count.
double row_dot(const float* a, const float* b, const float* c, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t j = 0;
  if (c) {
    for (; j + 4 <= n; j += 4)
      for (int k = 0; k < 4; ++k) s[k] += static_cast<double>(a[j + k] * b[j + k]) * c[j + k];
    for (; j < n; ++j) s[0] += static_cast<double>(a[j] * b[j]) * c[j];
  } else {
    for (; j + 4 <= n; j += 4)
      for (int k = 0; k < 4; ++k) s[k] += static_cast<double>(a[j + k]) * b[j + k];
    for (; j < n; ++j) s[0] += static_cast<double>(a[j]) * b[j];
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// ---------------------------------------------------------------- RMSNorm

// Saves x, x*rstd, rstd and w: the tensors the composite version's autograd keeps (core's
// memory estimate counts x and x*rstd per norm), so memory is unchanged; one pass each way.
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
    at::parallel_for(0, N, grain_rows(H), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* xr = xp + r * H;
        const double ss = row_dot(xr, xr, nullptr, H);
        const float rs = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(H) + eps));
        rp[r] = rs;
        float* hr = hp + r * H;
        float* yr = yp + r * H;
        for (int64_t j = 0; j < H; ++j) {
          hr[j] = xr[j] * rs;
          yr[j] = hr[j] * wp[j];
        }
      }
    });
    ctx->save_for_backward({xc, xhat, rstd, wc});
    return y;
  }

  // y_j = w_j xhat_j, xhat = x r, r = (mean(x^2) + eps)^-1/2, dr/dx_j = -r^3 x_j / H:
  //   dx_j = r (gy_j w_j - xhat_j mean_i(gy_i w_i xhat_i)),   dw_j = sum_rows gy_j xhat_j.
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
    at::parallel_for(0, N, grain_rows(H), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* gr = gp + r * H;
        const float* hr = hp + r * H;
        const double dot = row_dot(gr, wp, hr, H);
        const float m = static_cast<float>(dot / static_cast<double>(H));
        const float rs = rp[r];
        float* o = gxp + r * H;
        for (int64_t j = 0; j < H; ++j) o[j] = rs * (gr[j] * wp[j] - hr[j] * m);
      }
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

// ---------------------------------------------------------------- RoPE

// Walks the rows of x seen as [B, T, Hh, D] (D contiguous) and writes `out` [B, T, Hh, D]
// contiguous. sign = +1: y = x cos + rotate_half(x) sin (forward); sign = -1 with cos/sin
// shifted: the transpose of that map (backward), see RopeFn::backward.
template <bool kBackward>
void rope_rows(const Tensor& x_bthd, const Tensor& cos, const Tensor& sin, Tensor& out) {
  const int64_t B = x_bthd.size(0), T = x_bthd.size(1), Hh = x_bthd.size(2), D = x_bthd.size(3);
  const int64_t h = D / 2;
  const int64_t s0 = x_bthd.stride(0), s1 = x_bthd.stride(1), s2 = x_bthd.stride(2);
  const float* xp = x_bthd.const_data_ptr<float>();
  const float* cp = cos.const_data_ptr<float>();
  const float* sp = sin.const_data_ptr<float>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, B * T, grain_rows(Hh * D), [&](int64_t b, int64_t e) {
    for (int64_t bt = b; bt < e; ++bt) {
      const int64_t bi = bt / T, t = bt % T;
      const float* c = cp + t * D;
      const float* s = sp + t * D;
      for (int64_t hh = 0; hh < Hh; ++hh) {
        const float* x = xp + bi * s0 + t * s1 + hh * s2;
        float* o = op + (bt * Hh + hh) * D;
        if constexpr (!kBackward) {
          // rotate_half(x) = cat(-x[h:], x[:h]).
          for (int64_t j = 0; j < h; ++j) o[j] = x[j] * c[j] + (-x[j + h]) * s[j];
          for (int64_t j = h; j < D; ++j) o[j] = x[j] * c[j] + x[j - h] * s[j];
        } else {
          // d/dx_j of sum_k g_k y_k: g_j c_j + g_{j+h} s_{j+h} (j < h), g_j c_j - g_{j-h} s_{j-h}.
          for (int64_t j = 0; j < h; ++j) o[j] = x[j] * c[j] + x[j + h] * s[j + h];
          for (int64_t j = h; j < D; ++j) o[j] = x[j] * c[j] + (-x[j - h]) * s[j - h];
        }
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

// ---------------------------------------------------------------- SwiGLU

// Saves gu (gate and up) and sigmoid(gate): the same two tensors' worth of memory as the
// composite silu/mul pair (gu and silu(gate)), but the backward then needs no exp and runs as
// one pass writing both halves of the gradient into one [..., 2I] tensor (it was three
// kernels on strided halves and a temporary).
//   h = g s(g) u,  s = sigmoid:  dh/du = g s,  dh/dg = u s (1 + g (1 - s)).
//
// One row's forward, n = I: s = sigmoid(g) = 1/(1 + e) for g >= 0 and e/(1 + e) for g < 0 with
// e = exp(-|g|) <= 1 (never overflows), h = g s u. The tail goes through the same vector
// arithmetic (masked loads and stores only there: masked stores are slow on AMD cores), so an
// element's bits do not depend on its column (tp shards agree).
MESHWORK_AVX2 inline __m256 swiglu_sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = vec::exp_nonpositive(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
  const __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, e));
  return _mm256_blendv_ps(r, _mm256_mul_ps(e, r), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

MESHWORK_AVX2 void swiglu_forward_row(const float* g, const float* u, float* s, float* h, int64_t n) {
  const int64_t full = n & ~int64_t{7};
  for (int64_t j = 0; j < full; j += 8) {
    const __m256 x = _mm256_loadu_ps(g + j);
    const __m256 sg = swiglu_sigmoid(x);
    _mm256_storeu_ps(s + j, sg);
    _mm256_storeu_ps(h + j, _mm256_mul_ps(_mm256_mul_ps(x, sg), _mm256_loadu_ps(u + j)));
  }
  if (full < n) {
    const __m256i mask = vec::tail_mask(n - full);
    const __m256 x = _mm256_maskload_ps(g + full, mask);
    const __m256 sg = swiglu_sigmoid(x);
    _mm256_maskstore_ps(s + full, mask, sg);
    _mm256_maskstore_ps(h + full, mask, _mm256_mul_ps(_mm256_mul_ps(x, sg), _mm256_maskload_ps(u + full, mask)));
  }
}

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& gu_in) {
    Tensor gu = gu_in.contiguous();
    const int64_t I = gu.size(-1) / 2, N = gu.numel() / (2 * I);
    std::vector<int64_t> shape(gu.sizes().begin(), gu.sizes().end());
    shape.back() = I;
    Tensor h = at::empty(shape, gu.options());
    const bool avx2 = cpu_has_avx2_fma();
    // Without AVX2, ATen's sigmoid (a kernel of its own on the strided gate half).
    Tensor sig = avx2 ? at::empty(shape, gu.options()) : at::sigmoid(gu.narrow(-1, 0, I));
    const float* gp = gu.const_data_ptr<float>();
    float* sp = sig.data_ptr<float>();
    float* hp = h.data_ptr<float>();
    at::parallel_for(0, N, grain_rows(I), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* g = gp + r * 2 * I;
        const float* u = g + I;
        float* s = sp + r * I;
        float* o = hp + r * I;
        if (avx2) {
          swiglu_forward_row(g, u, s, o, I);
        } else {
          for (int64_t j = 0; j < I; ++j) o[j] = (g[j] * s[j]) * u[j];
        }
      }
    });
    ctx->save_for_backward({gu, sig});
    return h;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor& gu = saved[0];
    const Tensor& sig = saved[1];
    Tensor dh = grads[0].contiguous();
    const int64_t I = gu.size(-1) / 2, N = gu.numel() / (2 * I);
    Tensor out = at::empty(gu.sizes(), gu.options());
    const float* gp = gu.const_data_ptr<float>();
    const float* sp = sig.const_data_ptr<float>();
    const float* dp = dh.const_data_ptr<float>();
    float* op = out.data_ptr<float>();
    at::parallel_for(0, N, grain_rows(I), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* g = gp + r * 2 * I;
        const float* u = g + I;
        const float* s = sp + r * I;
        const float* d = dp + r * I;
        float* dg = op + r * 2 * I;
        float* du = dg + I;
        for (int64_t j = 0; j < I; ++j) {
          du[j] = d[j] * (g[j] * s[j]);
          dg[j] = (d[j] * u[j]) * (s[j] * (1.0f + g[j] * (1.0f - s[j])));
        }
      }
    });
    return {out};
  }
};

// ---------------------------------------------------------------- causal attention

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

// ---------------------------------------------------------------- linear

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

bool fused_ops_apply(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat;
}

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return RmsNormFn::apply(x, w, eps);
}

at::Tensor fused_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0 && cos.size(0) == x.size(2) &&
                  cos.size(1) == x.size(3),
              "fused_rope: x [B, H, T, D] with even D and cos/sin [T, D]");
  return RopeFn::apply(x, cos, sin);
}

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

bool fused_linear_applies(const at::Tensor& x, const at::Tensor& w) {
  return fused_ops_apply(x) && fused_ops_apply(w) && x.dim() >= 1 && w.dim() == 2 &&
         x.size(-1) == w.size(1) && x.numel() > 0 && w.is_contiguous() && cpu_has_avx2_fma();
}

at::Tensor fused_linear(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(fused_linear_applies(x, w),
              "fused_linear: fp32 CPU x [..., K] and contiguous w [N, K], on a CPU with AVX2 and FMA");
  return LinearFn::apply(x, w);
}

at::Tensor fused_swiglu(const at::Tensor& gu) {
  TORCH_CHECK(gu.size(-1) % 2 == 0, "fused_swiglu: the last dimension holds gate and up");
  return SwigluFn::apply(gu);
}

namespace {

struct AdamWConstants {
  float decay, b1, c1, b2, c2, inv_bc2, eps, step_size, grad_scale;
};

// The AdamW update of elements [b, end), 8 at a time. The last partial vector goes through the
// same vector operations on masked loads and stores, so an element's result does not depend on
// where a range (a thread's chunk, an FSDP shard) starts or ends.
MESHWORK_AVX2 void adamw_range_avx2(const AdamWConstants& k, float* p, const float* g, float* m,
                                    float* v, int64_t b, int64_t end) {
  const __m256 decay = _mm256_set1_ps(k.decay), b1 = _mm256_set1_ps(k.b1), c1 = _mm256_set1_ps(k.c1);
  const __m256 b2 = _mm256_set1_ps(k.b2), c2 = _mm256_set1_ps(k.c2);
  const __m256 inv_bc2 = _mm256_set1_ps(k.inv_bc2), eps = _mm256_set1_ps(k.eps);
  const __m256 step = _mm256_set1_ps(k.step_size), scale = _mm256_set1_ps(k.grad_scale);
  auto update = [&](__m256 pj, __m256 gj, __m256 mj, __m256 vj, __m256* po, __m256* mo, __m256* vo)
                    MESHWORK_AVX2 {
    gj = _mm256_mul_ps(gj, scale);
    mj = _mm256_fmadd_ps(mj, b1, _mm256_mul_ps(gj, c1));
    vj = _mm256_fmadd_ps(vj, b2, _mm256_mul_ps(_mm256_mul_ps(gj, gj), c2));
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vj, inv_bc2)), eps);
    *po = _mm256_fmadd_ps(pj, decay, _mm256_mul_ps(step, _mm256_div_ps(mj, denom)));
    *mo = mj;
    *vo = vj;
  };
  int64_t j = b;
  for (; j + 8 <= end; j += 8) {
    __m256 po, mo, vo;
    update(_mm256_loadu_ps(p + j), _mm256_loadu_ps(g + j), _mm256_loadu_ps(m + j),
           _mm256_loadu_ps(v + j), &po, &mo, &vo);
    _mm256_storeu_ps(p + j, po);
    _mm256_storeu_ps(m + j, mo);
    _mm256_storeu_ps(v + j, vo);
  }
  if (j < end) {
    const __m256i mask = vec::tail_mask(end - j);
    __m256 po, mo, vo;
    update(_mm256_maskload_ps(p + j, mask), _mm256_maskload_ps(g + j, mask),
           _mm256_maskload_ps(m + j, mask), _mm256_maskload_ps(v + j, mask), &po, &mo, &vo);
    _mm256_maskstore_ps(p + j, mask, po);
    _mm256_maskstore_ps(m + j, mask, mo);
    _mm256_maskstore_ps(v + j, mask, vo);
  }
}

}  // namespace

void fused_adamw_(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, double lr,
                  double beta1, double beta2, double eps, double weight_decay, double bc1,
                  double bc2, double grad_scale) {
  TORCH_CHECK(fused_ops_apply(p) && fused_ops_apply(g) && fused_ops_apply(m) && fused_ops_apply(v) &&
                  p.is_contiguous() && g.is_contiguous() && m.is_contiguous() && v.is_contiguous() &&
                  g.numel() == p.numel() && m.numel() == p.numel() && v.numel() == p.numel(),
              "fused_adamw_: contiguous fp32 CPU tensors of one size");
  const float decay = static_cast<float>(1 - lr * weight_decay);
  const float b1 = static_cast<float>(beta1), c1 = static_cast<float>(1 - beta1);
  const float b2 = static_cast<float>(beta2), c2 = static_cast<float>(1 - beta2);
  const float inv_bc2 = static_cast<float>(1 / bc2), e = static_cast<float>(eps);
  const float step_size = static_cast<float>(-lr / bc1), s = static_cast<float>(grad_scale);
  AdamWConstants k{decay, b1, c1, b2, c2, inv_bc2, e, step_size, s};
  float* pp = p.data_ptr<float>();
  const float* gp = g.const_data_ptr<float>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  const bool avx2 = cpu_has_avx2_fma();
  at::parallel_for(0, p.numel(), int64_t{1} << 15, [&](int64_t b, int64_t end) {
    if (avx2) {
      adamw_range_avx2(k, pp, gp, mp, vp, b, end);
      return;
    }
    for (int64_t j = b; j < end; ++j) {
      const float gj = gp[j] * k.grad_scale;
      const float mj = mp[j] * k.b1 + gj * k.c1;
      const float vj = vp[j] * k.b2 + (gj * gj) * k.c2;
      mp[j] = mj;
      vp[j] = vj;
      pp[j] = pp[j] * k.decay + k.step_size * (mj / (std::sqrt(vj * k.inv_bc2) + k.eps));
    }
  });
}

double fused_sum_squares(const at::Tensor& t) {
  TORCH_CHECK(fused_ops_apply(t) && t.is_contiguous(), "fused_sum_squares: a contiguous fp32 CPU tensor");
  constexpr int64_t kChunk = int64_t{1} << 15;
  const int64_t n = t.numel(), chunks = (n + kChunk - 1) / kChunk;
  const float* p = t.const_data_ptr<float>();
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  at::parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
      // Four independent sums keep the adder busy; their order is fixed.
      double s[4] = {0, 0, 0, 0};
      int64_t j = lo;
      for (; j + 4 <= hi; j += 4)
        for (int k = 0; k < 4; ++k) s[k] += static_cast<double>(p[j + k]) * p[j + k];
      for (; j < hi; ++j) s[0] += static_cast<double>(p[j]) * p[j];
      partial[static_cast<size_t>(c)] = (s[0] + s[1]) + (s[2] + s[3]);
    }
  });
  double total = 0;
  for (double v : partial) total += v;
  return total;
}

}  // namespace meshwork::trainer
