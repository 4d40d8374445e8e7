// One rank of a meshtrain run: builds the communicators, the model and its data-parallel
// wrapper, then runs the training loop (gradient accumulation, global-norm clipping, AdamW with
// warmup + cosine, metrics, checkpoints).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "core/mesh.h"
#include "core/model_spec.h"
#include "trainer/options.h"

namespace meshwork::trainer {

// Exact CPU tensor memory: a c10 allocator wrapper installed as LibTorch's CPU allocator (at
// the highest priority, before any tensor exists). It counts the bytes of every live CPU
// allocation it hands out (tensor storages and ATen's CPU scratch) and the high-water mark.
void install_tracking_cpu_allocator();
int64_t cpu_bytes_in_use();
int64_t cpu_peak_bytes();
void reset_cpu_peak();  // peak := current

// AdamW (decoupled weight decay, Loshchilov & Hutter), applied element-wise to flat tensors,
// so a shard updates exactly as the same elements of the full tensor would:
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   p = p (1 - lr wd) - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
struct AdamW {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  int64_t step = 0;                 // completed updates
  std::vector<at::Tensor> exp_avg;  // one per flat parameter
  std::vector<at::Tensor> exp_avg_sq;
  void init(const std::vector<at::Tensor>& params);
  // One step with the gradients multiplied by grad_scale (the clipping coefficient) on the fly.
  void update(std::vector<at::Tensor>& params, double lr, double grad_scale = 1.0);
};

// Linear warmup to `lr` over warmup steps, then cosine decay to lr/10 at the last step:
//   s < W:  lr (s + 1) / W
//   else:   lr_min + (lr - lr_min) (1 + cos(pi p)) / 2,   p = (s - W) / max(1, S - W - 1)
double learning_rate(const TrainingConfig& t, int64_t step);

// Runs this rank to the end. Returns the process exit code (0 ok, 2 invalid input, 3 failed).
int run_rank(const TrainerOptions& options, const LaunchEnv& env, const ModelSpec& spec,
             const MeshShape& shape);

}  // namespace meshwork::trainer
