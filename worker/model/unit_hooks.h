// Calls the model makes around the parts of its forward that a parameter-sharding wrapper
// (worker/parallel/full_shard.h) treats as units: the root (everything outside the decoder
// layers: embeddings, final norm, lm_head) and each decoder layer.
//
// Qwen2Model's forward calls BeforeRoot() first, then, for each layer i in order,
// BeforeLayer(i, input) before the layer (checkpointed or not) and AfterLayer(i, output) after it,
// and uses the tensors they return in place of the ones it passed. The root's parameters are used
// again after the model's forward (lm_head in the loss), so the root has no "after".
#ifndef VRAMLAB_WORKER_MODEL_UNIT_HOOKS_H_
#define VRAMLAB_WORKER_MODEL_UNIT_HOOKS_H_

#include <cstddef>

#include <torch/torch.h>

namespace vramlab::worker {

class ForwardUnitHooks {
 public:
  virtual ~ForwardUnitHooks() = default;

  virtual void BeforeRoot() = 0;
  virtual torch::Tensor BeforeLayer(size_t index, const torch::Tensor& input) = 0;
  virtual torch::Tensor AfterLayer(size_t index, const torch::Tensor& output) = 0;
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_UNIT_HOOKS_H_
