#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace meshwork::trainer {

double learning_rate(const TrainingConfig& t, int64_t step) {
  const double lr = t.lr, lr_min = t.lr / 10;
  if (step < t.warmup_steps) return lr * static_cast<double>(step + 1) / t.warmup_steps;
  const double span = std::max<int64_t>(1, t.steps - t.warmup_steps - 1);
  const double p = std::min(1.0, static_cast<double>(step - t.warmup_steps) / span);
  return lr_min + (lr - lr_min) * (1 + std::cos(M_PI * p)) / 2;
}

}  // namespace meshwork::trainer
