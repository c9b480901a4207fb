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

// `steps` AdamW steps (lr 1e-2) over the model's trainable parameters on `ids` as inputs and
// labels, checking after every backward that exactly the trainable parameters have a gradient.
inline void TrainCheckingOnlyTrainableGetGradients(Qwen2ForCausalLM& model, const torch::Tensor& ids,
                                                   int steps) {
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
