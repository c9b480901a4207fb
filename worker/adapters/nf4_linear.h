// A LoRA-wrapped projection whose frozen base weight is stored in NF4 (qlora.h).
#ifndef VRAMLAB_WORKER_ADAPTERS_NF4_LINEAR_H_
#define VRAMLAB_WORKER_ADAPTERS_NF4_LINEAR_H_

#include <memory>

#include <torch/torch.h>

#include "worker/adapters/lora_linear.h"
#include "worker/adapters/nf4.h"
#include "worker/model/qwen2_layers.h"

namespace vramlab::worker {

// x W^T with W = dequantise(weight) made for the matmul and freed after it; backward makes it
// again for x's gradient (W is frozen: it has none). Nothing but `weight`'s address is saved.
// x must be in the weight's compute dtype (Nf4Tables).
torch::Tensor Nf4Matmul(const torch::Tensor& x, const Nf4Tensor* weight);

class Nf4LoraLinear : public LinearAdapter {
 public:
  Nf4LoraLinear(Nf4Tensor weight, std::shared_ptr<LoraLinear> lora)
      : weight_(std::move(weight)), lora_(std::move(lora)) {}

  torch::Tensor Forward(LinearImpl& base, const torch::Tensor& x) override;

  const Nf4Tensor& weight() const { return weight_; }

 private:
  Nf4Tensor weight_;
  std::shared_ptr<LoraLinear> lora_;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_ADAPTERS_NF4_LINEAR_H_
