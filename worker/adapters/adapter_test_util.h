// Helpers shared by the adapter tests.
#ifndef VRAMLAB_WORKER_ADAPTERS_ADAPTER_TEST_UTIL_H_
#define VRAMLAB_WORKER_ADAPTERS_ADAPTER_TEST_UTIL_H_

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "worker/adapters/lora.h"
#include "worker/model/loss.h"
#include "worker/model/qwen2_model.h"
#include "worker/optim/optimizer.h"

namespace vramlab::worker::adapter_testing {

// The adapters the LoRA and QLoRA tests attach to the tiny checkpoint: rank 4, alpha 8, seed 7.
inline LoraOptions Rank4(double dropout = 0) {
  LoraOptions options;
  options.rank = 4;
  options.alpha = 8;
  options.dropout = dropout;
  options.seed = 7;
  return options;
}

// `steps` AdamW steps (lr 1e-2) over the model's trainable parameters on `ids` as inputs and
// labels, checking after every backward that exactly the trainable parameters have a gradient.
inline void TrainCheckingOnlyTrainableGetGradients(Qwen2ForCausalLM& model,
                                                   const torch::Tensor& ids, int steps) {
  OptimizerOptions options;
  options.lr = 1e-2;
  auto optimizer = MakeOptimizer(TrainableParameters(*model), options);
  for (int step = 0; step < steps; ++step) {
    CausalLmLoss(model, ids, ids, LossImpl::kFull, 0).backward();
    for (const auto& item : model->named_parameters()) {
      EXPECT_EQ(item.value().grad().defined(), item.value().requires_grad()) << item.key();
    }
    optimizer->Step();
    optimizer->ZeroGrad();
  }
}

}  // namespace vramlab::worker::adapter_testing

#endif  // VRAMLAB_WORKER_ADAPTERS_ADAPTER_TEST_UTIL_H_
