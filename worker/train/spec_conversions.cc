#include "worker/train/spec_conversions.h"

#include <stdexcept>

#include "worker/safetensors/load_error.h"
#include "worker/spec/validate_spec.h"
#include "worker/util/file_paths.h"

namespace vramlab::worker {

torch::Dtype ToTorchDtype(SpecDType dtype) {
  switch (dtype) {
    case SpecDType::kFloat32: return torch::kFloat32;
    case SpecDType::kFloat16: return torch::kFloat16;
    default: return torch::kBFloat16;
  }
}

LossImpl ToLossImpl(SpecLoss loss) { return loss == SpecLoss::kChunked ? LossImpl::kChunked : LossImpl::kFull; }

OptimizerOptions ToOptimizerOptions(const SpecOptimizer& o) {
  OptimizerOptions options;
  switch (o.kind) {
    case SpecOptimizerKind::kAdamWFp32Master: options.kind = OptimizerKind::kAdamWFp32Master; break;
    case SpecOptimizerKind::kSgd: options.kind = OptimizerKind::kSgd; break;
    case SpecOptimizerKind::kAdamW8bit: options.kind = OptimizerKind::kAdamW8bit; break;
    default: options.kind = OptimizerKind::kAdamW; break;
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

ModelOptions ToModelOptions(const SpecTraining& training, torch::Device device) {
  ModelOptions options;
  options.attention = training.attention == SpecAttention::kSdpa ? AttentionImpl::kSdpa : AttentionImpl::kEager;
  options.checkpoint_every_k_layers = training.checkpoint_every_k_layers;
  options.kernels = training.kernels == SpecKernels::kFused ? KernelsImpl::kFused : KernelsImpl::kAten;
  options.dtype = ToTorchDtype(training.dtype);
  options.device = device;
  return options;
}

LoraOptions ToLoraOptions(const SpecAdapter& adapter, uint32_t init_seed) {
  LoraOptions options;
  options.rank = adapter.rank;
  options.alpha = adapter.alpha;
  options.dropout = adapter.dropout;
  for (SpecAdapterTarget target : adapter.target_modules) {
    options.targets.push_back(spec_rules::AdapterTargetModuleName(target));
  }
  options.dtype = ToTorchDtype(adapter.dtype);
  options.seed = init_seed;
  return options;
}

DecoderConfig ResolveModelConfig(const SpecModel& model) {
  if (model.config.present) {
    // ApplyDefaultsAndValidate checked the family's rules already; a failure here is the same rule.
    DecoderConfig config;
    const spec_rules::FieldError family =
        spec_rules::ResolveDecoderConfig(ModelConfigFieldsOf(model.config), &config);
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
      throw LoadError(config_json + " not found and no model.preset or model.config gives the shapes");
    }
  }
  try {
    return PresetConfig(model.preset);
  } catch (const std::invalid_argument& e) {
    throw SpecError("model.preset", e.what());
  }
}

}  // namespace vramlab::worker
