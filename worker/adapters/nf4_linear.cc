#include "worker/adapters/nf4_linear.h"

namespace vramlab::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class Nf4MatmulFunction : public torch::autograd::Function<Nf4MatmulFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const Nf4Tensor* weight) {
    ctx->saved_data["weight"] = reinterpret_cast<int64_t>(weight);
    return torch::linear(x, DequantizeNf4(*weight));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto* weight = reinterpret_cast<const Nf4Tensor*>(ctx->saved_data["weight"].toInt());
    const torch::Tensor& grad = grad_outputs[0];
    return {torch::matmul(grad, DequantizeNf4(*weight)), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor Nf4Matmul(const torch::Tensor& x, const Nf4Tensor* weight) {
  return Nf4MatmulFunction::apply(x, weight);
}

torch::Tensor Nf4LoraLinear::Forward(LinearImpl& base, const torch::Tensor& x) {
  torch::Tensor result = Nf4Matmul(x, &weight_);
  if (base.bias.defined()) result = result + base.bias;
  torch::Tensor update = lora_->Update(x, base.is_training());
  return result +
         (update.scalar_type() == result.scalar_type() ? update : update.to(result.scalar_type()));
}

}  // namespace vramlab::worker
