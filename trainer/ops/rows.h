// Row loops shared by the fused ops (trainer/ops/*.cpp): how rows are split between threads, and
// a fixed-order double dot product over a row. Include only from the op files: they are compiled
// with OpenMP (trainer/CMakeLists.txt), without which at::parallel_for runs on one thread.
#pragma once

#include <algorithm>
#include <cstdint>

#include <ATen/Parallel.h>

namespace meshwork::trainer::ops {

// Rows per task: enough work per task that a fork/join pays for itself (~32k elements).
inline int64_t grain_rows(int64_t row_len) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, row_len));
}

// fn(r) for every row r in [0, rows), rows of row_len elements split between threads.
template <typename Fn>
void parallel_rows(int64_t rows, int64_t row_len, const Fn& fn) {
  at::parallel_for(0, rows, grain_rows(row_len), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) fn(r);
  });
}

// sum_j double(a_j * b_j) * c_j (c = nullptr: sum_j double(a_j) * b_j) with four independent
// double sums in a fixed order: one dependent chain of double adds is latency-bound (~4 cycles an
// element, ~1,000 cycles a row of 256); four keep the adder busy. The order never depends on the
// row's position or the thread count.
inline double row_dot(const float* a, const float* b, const float* c, int64_t n) {
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

}  // namespace meshwork::trainer::ops
