// Seeded random initialization of a Qwen2 model, as HF's Qwen2PreTrainedModel._init_weights:
// linear and embedding weights ~ N(0, std), biases 0, RMSNorm weights 1.
#ifndef VRAMLAB_WORKER_MODEL_INIT_H_
#define VRAMLAB_WORKER_MODEL_INIT_H_

#include <cstdint>

#include "worker/model/qwen2_model.h"

namespace vramlab::worker {

// The elements of one block of a tensor's random values (see InitializeWeights).
inline constexpr int64_t kInitBlockElements = int64_t{1} << 20;

// Deterministic for a seed and independent of the model's device, its dtype and the host's thread
// count: a weight is drawn on the CPU in fp32, in blocks of kInitBlockElements consecutive
// elements, block b of the weight at position i of named_parameters() from its own generator,
// seeded by InitBlockSeed(seed, i, b). The blocks are drawn in parallel on LibTorch's intra-op
// threads (a 7B model is drawn in seconds, not the minute one sequential generator takes), then
// the weight is copied into its parameter before the next is drawn, so host memory holds at most
// one parameter's fp32 copy.
void InitializeWeights(Qwen2ForCausalLMImpl& model, uint64_t seed, double std);

// The generator seed of block `block` of the parameter at `position`: splitmix64 over the three.
uint64_t InitBlockSeed(uint64_t seed, uint64_t position, uint64_t block);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_INIT_H_
