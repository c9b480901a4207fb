// From the spec's vocabulary to the model's and the optimizers' (worker/model, worker/optim).
#ifndef VRAMLAB_WORKER_TRAIN_SPEC_CONVERSIONS_H_
#define VRAMLAB_WORKER_TRAIN_SPEC_CONVERSIONS_H_

#include <string>

#include <torch/torch.h>

#include "worker/adapters/lora.h"
#include "worker/model/loss.h"
#include "worker/model/qwen2_config.h"
#include "worker/model/qwen2_model.h"
#include "worker/optim/optimizer.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

torch::Dtype ToTorchDtype(DType dtype);
LossImpl ToLossImpl(plain::LossImpl loss);
OptimizerOptions ToOptimizerOptions(const OptimizerSpec& optimizer);
ModelOptions ToModelOptions(const TrainingSpec& training, torch::Device device);
// The LoRA options of an enabled adapter; the adapters' init seed is the model's.
LoraOptions ToLoraOptions(const AdapterSpec& adapter, uint32_t init_seed);

// The model's shapes: spec.model.config when given, else weights_dir/config.json when present,
// else the preset. Throws SpecError (bad config or preset) or LoadError (unreadable config.json).
DecoderConfig ResolveModelConfig(const ModelSpec& model);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_TRAIN_SPEC_CONVERSIONS_H_
