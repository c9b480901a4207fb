#include "worker/adapters/qlora.h"

#include <memory>
#include <stdexcept>

#include "worker/adapters/lora_linear.h"
#include "worker/adapters/nf4_linear.h"

namespace vramlab::worker {
namespace {

bool EndsWithBuffer(const std::string& name, const char* buffer) {
  const std::string suffix(buffer);
  if (name.size() < suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  return name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.';
}

}  // namespace

bool IsNf4ConstantBuffer(const std::string& name) {
  return EndsWithBuffer(name, kNf4AbsmaxCodesBuffer) ||
         EndsWithBuffer(name, kNf4AbsmaxScalesBuffer);
}

bool IsNf4StorageBuffer(const std::string& name) {
  return EndsWithBuffer(name, kNf4CodesBuffer) || IsNf4ConstantBuffer(name);
}

QloraSummary AttachQlora(Qwen2ForCausalLMImpl& model, const LoraOptions& options,
                         const torch::Device& device) {
  QloraSummary summary;
  summary.adapters = AttachLora(model, options);
  torch::NoGradGuard no_grad;
  const torch::Dtype compute_dtype = model.model->embed_tokens->weight.scalar_type();
  auto tables = std::make_shared<const Nf4Tables>(compute_dtype, device);
  summary.quantization_constant_bytes += tables->bytes();
  summary.nf4_table_bytes = tables->bytes();
  for (Qwen2DecoderLayer layer : model.model->decoder_layers()) {
    for (const std::string& name : AllLoraTargets()) {
      Linear& base = TargetLinear(*layer, name);
      auto lora = std::dynamic_pointer_cast<LoraLinear>(base->adapter);
      if (!lora) continue;  // not a target
      Nf4Tensor weight = QuantizeNf4(base->weight, tables);
      summary.nf4_code_bytes += weight.code_bytes();
      summary.quantization_constant_bytes += weight.constant_bytes();
      summary.quantized_parameters += weight.numel;
      // The full-precision weight is gone; the parameter stays (empty) so that names still match
      // HF's checkpoint names, and the NF4 tensors are visible as buffers.
      base->weight.set_();
      base->register_buffer(kNf4CodesBuffer, weight.codes);
      base->register_buffer(kNf4AbsmaxCodesBuffer, weight.absmax_codes);
      base->register_buffer(kNf4AbsmaxScalesBuffer, weight.absmax_scales);
      base->adapter = std::make_shared<Nf4LoraLinear>(std::move(weight), lora);
    }
  }
  for (torch::Tensor& p : model.parameters()) {
    if (p.numel() > 0 && p.device() != device) p.set_data(p.to(device));
  }
  return summary;
}

}  // namespace vramlab::worker
