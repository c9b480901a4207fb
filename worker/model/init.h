// Seeded random initialization of a Qwen2 model, as HF's Qwen2PreTrainedModel._init_weights:
// linear and embedding weights ~ N(0, std), biases 0, RMSNorm weights 1.
#ifndef VRAMLAB_WORKER_MODEL_INIT_H_
#define VRAMLAB_WORKER_MODEL_INIT_H_

#include <cstdint>

#include "worker/model/qwen2_model.h"

namespace vramlab::worker {

// Deterministic for a seed and independent of the model's device and dtype: every tensor is drawn
// on the CPU in fp32 from one generator, in named_parameters() order, and copied into its
// parameter before the next is drawn, so host memory holds at most one parameter's fp32 copy.
void InitializeWeights(Qwen2ForCausalLMImpl& model, uint64_t seed, double std);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_INIT_H_
