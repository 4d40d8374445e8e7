// Sum of squares of one tensor: the local part of the global gradient norm.
//
//   ||g||_2 = sqrt(sum over parameters p of sum_i g_p,i^2)
// over the whole model, so each rank sums the squares of the gradients it holds (weighted by
// 1 / the number of ranks holding the same values), the ranks all-reduce that sum, and the root
// is the norm (DataParallel::grad_norm, trainer/parallelize_dp.cpp). Clipping then scales every
// gradient by min(1, max_norm / (norm + 1e-6)) inside the AdamW pass (trainer/ops/adamw.cpp).
//
// Here: one read of the data, accumulated in double (the composite g.pow(2).sum(kDouble) writes
// the squares, then converts them to a double copy before summing). Fixed chunks of 32k
// elements, each summed by ops::row_dot, then the chunks' sums added in order: the same bits
// whatever the thread count.
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "trainer/fused_ops.h"
#include "trainer/ops/rows.h"

namespace meshwork::trainer {

double fused_sum_squares(const at::Tensor& t) {
  TORCH_CHECK(fused_ops_apply(t) && t.is_contiguous(), "fused_sum_squares: a contiguous fp32 CPU tensor");
  constexpr int64_t kChunk = int64_t{1} << 15;
  const int64_t n = t.numel(), chunks = (n + kChunk - 1) / kChunk;
  const float* p = t.const_data_ptr<float>();
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  at::parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
      partial[static_cast<size_t>(c)] = ops::row_dot(p + lo, p + lo, nullptr, hi - lo);
    }
  });
  double total = 0;
  for (double v : partial) total += v;
  return total;
}

}  // namespace meshwork::trainer
