#include "worker/adapters/lora_linear.h"

namespace vramlab::worker {

torch::Tensor LoraLinear::Update(const torch::Tensor& x, bool training) const {
  torch::Tensor h = x.to(a_->weight.scalar_type());
  if (dropout_ > 0) h = torch::dropout(h, dropout_, training);
  // PEFT: lora_B(lora_A(dropout(x))) * scaling, in that order.
  return torch::linear(torch::linear(h, a_->weight), b_->weight) * scaling_;
}

torch::Tensor LoraLinear::Forward(LinearImpl& base, const torch::Tensor& x) {
  torch::Tensor result = torch::linear(x, base.weight, base.bias);
  const torch::ScalarType result_dtype = result.scalar_type();
  result = result + Update(x, base.is_training());
  return result.scalar_type() == result_dtype ? result : result.to(result_dtype);
}

}  // namespace vramlab::worker
