// Linear warmup to `lr` over warmup steps, then cosine decay to lr/10 at the last step:
//   s < W:  lr (s + 1) / W
//   else:   lr_min + (lr - lr_min) (1 + cos(pi p)) / 2,   p = (s - W) / max(1, S - W - 1)
#pragma once

#include <cstdint>

#include "trainer/options.h"

namespace meshwork::trainer {

double learning_rate(const TrainingConfig& t, int64_t step);

}  // namespace meshwork::trainer
