#include "trainer/optimizer.h"

#include <cmath>

#include "trainer/fused_ops.h"

namespace meshwork::trainer {

using at::Tensor;

void AdamW::init(const std::vector<Tensor>& params) {
  exp_avg.clear();
  exp_avg_sq.clear();
  for (const auto& p : params) {
    exp_avg.push_back(at::zeros_like(p).detach());
    exp_avg_sq.push_back(at::zeros_like(p).detach());
  }
}

void AdamW::update(std::vector<Tensor>& params, double lr, double grad_scale) {
  at::NoGradGuard no_grad;
  ++step;
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(step));
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor& p = params[i];
    if (!p.grad().defined()) continue;
    const Tensor& g = p.grad();
    const bool fused = p.device().is_cpu() && p.scalar_type() == at::kFloat &&
                       g.scalar_type() == at::kFloat && p.is_contiguous() && g.is_contiguous() &&
                       exp_avg[i].is_contiguous() && exp_avg_sq[i].is_contiguous();
    if (!fused) {
      Tensor gs = grad_scale == 1.0 ? g : g * grad_scale;
      p.mul_(1 - lr * weight_decay);
      exp_avg[i].mul_(beta1).add_(gs, 1 - beta1);
      exp_avg_sq[i].mul_(beta2).addcmul_(gs, gs, 1 - beta2);
      Tensor denom = (exp_avg_sq[i] / bc2).sqrt_().add_(eps);
      p.addcdiv_(exp_avg[i], denom, -lr / bc1);
      continue;
    }
    // One pass over p, g, m, v instead of eight kernels (and a temporary) per tensor.
    fused_adamw_(p, g, exp_avg[i], exp_avg_sq[i], lr, beta1, beta2, eps, weight_decay, bc1, bc2,
                 grad_scale);
  }
}

}  // namespace meshwork::trainer
