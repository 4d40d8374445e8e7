// AdamW (decoupled weight decay, Loshchilov & Hutter), applied element-wise to flat tensors,
// so a shard updates exactly as the same elements of the full tensor would:
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   p = p (1 - lr wd) - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace meshwork::trainer {

struct AdamW {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  int64_t step = 0;                 // completed updates
  std::vector<at::Tensor> exp_avg;  // one per flat parameter
  std::vector<at::Tensor> exp_avg_sq;
  // CUDA: the step count as the fused kernel reads it (one fp32 scalar on the device per
  // parameter, as torch.optim keeps them); derived from `step`, never checkpointed.
  std::vector<at::Tensor> device_steps;
  void init(const std::vector<at::Tensor>& params);
  // One step with the gradients multiplied by grad_scale (the clipping coefficient) on the fly.
  void update(std::vector<at::Tensor>& params, double lr, double grad_scale = 1.0);
  // The same step for the listed tensors in one call of torch's multi-tensor fused AdamW
  // (at::_fused_adamw_), `step` being the step count after this update (bias corrections).
  // update() runs CUDA fp32 parameters through it; it runs on CPU too (tests compare the two).
  void torch_fused_step(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads,
                        std::vector<at::Tensor>& exp_avgs, std::vector<at::Tensor>& exp_avg_sqs,
                        std::vector<at::Tensor>& steps, double lr, double grad_scale) const;
};

}  // namespace meshwork::trainer
