// The units of the Qwen2 model that the parallel wrappers work in (full_shard.h,
// gradient_reduction.h): one per decoder layer, in order, and the root (every tracked tensor in
// no layer: embeddings, final norm, lm_head) last.
#ifndef VRAMLAB_WORKER_PARALLEL_MODEL_UNITS_H_
#define VRAMLAB_WORKER_PARALLEL_MODEL_UNITS_H_

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "worker/model/qwen2_model.h"

namespace vramlab::worker {

// `index_of` maps the TensorImpl of each tracked tensor (parameters, and NF4 buffers where
// tracked) to its index in [0, tracked). Unit i < layers holds the indices of decoder layer i's
// tracked parameters and buffers in the layer's order, each tensor in the first unit that has it;
// the last unit holds every index no layer has, in increasing order.
std::vector<std::vector<size_t>> ModelUnits(Qwen2ModelImpl& model,
                                            const std::unordered_map<const void*, size_t>& index_of,
                                            size_t tracked);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_PARALLEL_MODEL_UNITS_H_
