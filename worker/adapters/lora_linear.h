// One LoRA-wrapped linear layer, with HF PEFT's semantics (peft.tuners.lora.Linear):
//
//   y = base(x) + B(A(dropout(x))) * alpha / rank,   A: [rank, in], B: [out, rank]
//
// computed as PEFT does: x is cast to the adapter dtype for the adapter path, the sum is taken in
// the wider of the two dtypes and cast back to the base output's dtype. Dropout is active only in
// training mode (the base Linear's is_training()) and only when the probability is positive.
//
// A and B are registered on the base Linear as submodules "lora_A" and "lora_B" (each with a
// "weight"), so that named_parameters() shows PEFT's names without the adapter name, e.g.
// "model.layers.0.self_attn.q_proj.lora_A.weight".
#ifndef VRAMLAB_WORKER_ADAPTERS_LORA_LINEAR_H_
#define VRAMLAB_WORKER_ADAPTERS_LORA_LINEAR_H_

#include <torch/torch.h>

#include "worker/model/qwen2_layers.h"

namespace vramlab::worker {

class LoraLinear : public LinearAdapter {
 public:
  // `a` and `b` are the adapter weights' modules (already registered on the base layer).
  LoraLinear(Linear a, Linear b, double scaling, double dropout)
      : a_(std::move(a)), b_(std::move(b)), scaling_(scaling), dropout_(dropout) {}

  torch::Tensor Forward(LinearImpl& base, const torch::Tensor& x) override;

  // The update added to base(x) alone (no cast back); for QLoRA's forward too.
  torch::Tensor Update(const torch::Tensor& x, bool training) const;

  const torch::Tensor& a() const { return a_->weight; }
  const torch::Tensor& b() const { return b_->weight; }

 private:
  Linear a_;
  Linear b_;
  double scaling_;
  double dropout_;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_ADAPTERS_LORA_LINEAR_H_
