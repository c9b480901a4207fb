#include "worker/optim/adamw_math.h"

#include <cmath>

namespace vramlab::worker::optim_internal {

AdamWFloatScalars FloatScalarsAt(const AdamWHyper& hyper, int64_t step) {
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(step));
  AdamWFloatScalars c;
  c.decay = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay);
  c.lerp_weight = static_cast<float>(1.0 - hyper.beta1);
  c.beta2 = static_cast<float>(hyper.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2);
  c.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bias_correction2));
  c.eps = static_cast<float>(hyper.eps);
  c.neg_step_size = static_cast<float>(-(hyper.lr / bias_correction1));
  return c;
}

void AdamWUpdate(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
                 const torch::Tensor& grad, const torch::Tensor& exp_avg,
                 const torch::Tensor& exp_avg_sq) {
  // Tensors are handed in by value-like const refs to views; the in-place ops write through them.
  torch::Tensor p = param, m = exp_avg, v = exp_avg_sq;
  p.mul_(1.0 - hyper.lr * hyper.weight_decay);
  m.lerp_(grad, 1.0 - hyper.beta1);
  v.mul_(hyper.beta2).addcmul_(grad, grad, 1.0 - hyper.beta2);
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(step));
  const double step_size = hyper.lr / bias_correction1;
  torch::Tensor denom = v.sqrt().div_(std::sqrt(bias_correction2)).add_(hyper.eps);
  p.addcdiv_(m, denom, -step_size);
}

}  // namespace vramlab::worker::optim_internal
