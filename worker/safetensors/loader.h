// Loads an HF snapshot directory's weights into an existing Qwen2 model.
#ifndef VRAMLAB_WORKER_SAFETENSORS_LOADER_H_
#define VRAMLAB_WORKER_SAFETENSORS_LOADER_H_

#include <string>

#include "worker/model/qwen2_model.h"
#include "worker/safetensors/load_error.h"

namespace vramlab::worker {

// Reads `dir`/model.safetensors.index.json and its shards, or else `dir`/model.safetensors, and
// copies each tensor straight from the mapped file into the parameter of the same HF name, on the
// parameter's device and in its dtype (F32, BF16 and F16 storage are converted). One file is
// mapped at a time; no second host copy of the model is made. Every parameter must be found
// exactly once with its exact shape; a tied model takes no lm_head.weight. Throws LoadError naming
// the file and tensor at fault; the model is then partly overwritten.
void LoadSafetensorsDir(Qwen2ForCausalLMImpl& model, const std::string& dir);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SAFETENSORS_LOADER_H_
