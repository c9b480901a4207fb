#include "worker/train/spec_conversions.h"

#include <stdexcept>

#include "common/spec/adapter_rules.h"
#include "worker/safetensors/load_error.h"
#include "worker/util/file_paths.h"

namespace vramlab::worker {

torch::Dtype ToTorchDtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return torch::kFloat32;
    case DType::kFloat16:
      return torch::kFloat16;
    default:
      return torch::kBFloat16;
  }
}

LossImpl ToLossImpl(plain::LossImpl loss) {
  return loss == plain::LossImpl::kChunked ? LossImpl::kChunked : LossImpl::kFull;
}

OptimizerOptions ToOptimizerOptions(const OptimizerSpec& o) {
  OptimizerOptions options;
  switch (o.kind) {
    case plain::OptimizerKind::kAdamwFp32Master:
      options.kind = OptimizerKind::kAdamWFp32Master;
      break;
    case plain::OptimizerKind::kSgd:
      options.kind = OptimizerKind::kSgd;
      break;
    case plain::OptimizerKind::kAdamw8bit:
      options.kind = OptimizerKind::kAdamW8bit;
      break;
    default:
      options.kind = OptimizerKind::kAdamW;
      break;
  }
  options.lr = o.learning_rate;
  options.beta1 = o.beta1;
  options.beta2 = o.beta2;
  options.eps = o.epsilon;
  options.weight_decay = o.weight_decay;
  options.momentum = o.momentum;
  options.offload_to_cpu = o.offload_to_cpu;
  options.in_backward = o.in_backward;
  options.delayed_update = o.delayed_update;
  return options;
}

ModelOptions ToModelOptions(const TrainingSpec& training, torch::Device device) {
  ModelOptions options;
  options.attention = training.attention == plain::AttentionImpl::kSdpa ? AttentionImpl::kSdpa
                                                                        : AttentionImpl::kEager;
  options.checkpoint_every_k_layers = training.checkpoint_every_k_layers;
  options.kernels =
      training.kernels == plain::KernelsImpl::kFused ? KernelsImpl::kFused : KernelsImpl::kAten;
  options.dtype = ToTorchDtype(training.dtype);
  options.device = device;
  return options;
}

LoraOptions ToLoraOptions(const AdapterSpec& adapter, uint32_t init_seed) {
  LoraOptions options;
  options.rank = adapter.rank;
  options.alpha = adapter.alpha;
  options.dropout = adapter.dropout;
  for (AdapterTarget target : adapter.target_modules) {
    options.targets.push_back(spec_rules::AdapterTargetModuleName(static_cast<int>(target)));
  }
  options.dtype = ToTorchDtype(adapter.dtype);
  options.seed = init_seed;
  return options;
}

DecoderConfig ResolveModelConfig(const ModelSpec& model) {
  if (model.config != ModelConfig{}) {
    // ResolveAndValidate checked the family's rules already; a failure here is the same rule.
    DecoderConfig config;
    const spec_rules::FieldError family = spec_rules::ResolveDecoderConfig(model.config, &config);
    if (!family.ok()) throw SpecError("model.config." + family.field, family.message);
    try {
      ValidateConfig(config);
    } catch (const std::invalid_argument& e) {
      throw SpecError("model.config", e.what());
    }
    return config;
  }
  if (!model.weights_dir.empty()) {
    const std::string config_json = JoinPath(model.weights_dir, "config.json");
    if (PathExists(config_json)) {
      try {
        return ConfigFromFile(config_json);
      } catch (const std::exception& e) {  // unreadable, not JSON, or shapes the model rejects
        throw LoadError(config_json + ": " + e.what());
      }
    }
    if (model.preset.empty()) {
      throw LoadError(config_json +
                      " not found and no model.preset or model.config gives the shapes");
    }
  }
  try {
    return PresetConfig(model.preset);
  } catch (const std::invalid_argument& e) {
    throw SpecError("model.preset", e.what());
  }
}

}  // namespace vramlab::worker
