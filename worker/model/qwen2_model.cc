#include "worker/model/qwen2_model.h"

#include <stdexcept>

#include "worker/model/checkpoint.h"

namespace vramlab::worker {
namespace {

torch::TensorOptions ParameterOptions(const ModelOptions& options) {
  if (!torch::isFloatingType(options.dtype)) {
    throw std::invalid_argument("model dtype must be a floating-point type");
  }
  if (options.checkpoint_every_k_layers < 0) {
    throw std::invalid_argument("checkpoint_every_k_layers must be >= 0, got " +
                                std::to_string(options.checkpoint_every_k_layers));
  }
  return torch::TensorOptions().dtype(options.dtype).device(options.device);
}

}  // namespace

Qwen2ModelImpl::Qwen2ModelImpl(const DecoderConfig& config, const ModelOptions& options)
    : config_(config), options_(options) {
  ValidateConfig(config_);
  const torch::TensorOptions tensor_options = ParameterOptions(options_);
  embed_tokens = register_module(
      "embed_tokens", Embedding(config_.vocab_size, config_.hidden_size, tensor_options));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    decoder_layers_.push_back(Qwen2DecoderLayer(config_, i, tensor_options));
    layers->push_back(decoder_layers_.back());
  }
  norm =
      register_module("norm", RMSNorm(config_.hidden_size, config_.rms_norm_eps, tensor_options));
}

AttentionImpl Qwen2ModelImpl::EffectiveAttention() const {
  return options_.attention == AttentionImpl::kSdpa && SdpaAvailable() ? AttentionImpl::kSdpa
                                                                       : AttentionImpl::kEager;
}

torch::Tensor Qwen2ModelImpl::forward(const torch::Tensor& input_ids) {
  if (input_ids.dim() != 2 || input_ids.scalar_type() != torch::kInt64) {
    throw std::invalid_argument("input_ids must be an int64 tensor [batch, seq]");
  }
  const torch::Tensor& table = embed_tokens->weight;
  DecoderInputs in = MakeDecoderInputs(config_, input_ids.size(1), EffectiveAttention(),
                                       table.scalar_type(), table.device());
  in.sdpa_native_gqa = options_.sdpa_native_gqa;
  in.kernels = options_.kernels;
  in.preserve_rng_state = preserve_rng_state_;
  if (unit_hooks_ != nullptr) unit_hooks_->BeforeRoot();
  torch::Tensor hidden = embed_tokens(input_ids);
  const int k = options_.checkpoint_every_k_layers;
  for (size_t i = 0; i < decoder_layers_.size(); ++i) {
    in.sdpa_backend = i == 0 ? &sdpa_backend_ : nullptr;
    if (unit_hooks_ != nullptr) hidden = unit_hooks_->BeforeLayer(i, hidden);
    if (k > 0 && i % static_cast<size_t>(k) == 0) {
      hidden = CheckpointedLayerForward(*decoder_layers_[i], hidden, in);
    } else {
      hidden = decoder_layers_[i]->forward(hidden, in);
    }
    if (unit_hooks_ != nullptr) hidden = unit_hooks_->AfterLayer(i, hidden);
  }
  return norm->Apply(hidden, options_.kernels);
}

Qwen2ForCausalLMImpl::Qwen2ForCausalLMImpl(const DecoderConfig& config, const ModelOptions& options)
    : config_(config), options_(options) {
  model = register_module("model", Qwen2Model(config_, options_));
  if (!config_.tie_word_embeddings) {
    lm_head = register_module("lm_head", Linear(config_.hidden_size, config_.vocab_size,
                                                /*bias=*/false, ParameterOptions(options_)));
  }
}

torch::Tensor Qwen2ForCausalLMImpl::Hidden(const torch::Tensor& input_ids) {
  return model(input_ids);
}

torch::Tensor Qwen2ForCausalLMImpl::LmHeadWeight() {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

torch::Tensor Qwen2ForCausalLMImpl::Logits(const torch::Tensor& input_ids) {
  return torch::linear(Hidden(input_ids), LmHeadWeight());
}

std::string Qwen2ForCausalLMImpl::attention_backend() const {
  if (options_.attention == AttentionImpl::kEager) return "eager";
  if (model->EffectiveAttention() == AttentionImpl::kEager) {
    return "eager (sdpa unavailable on LibTorch <2)";
  }
  const std::string& backend = model->sdpa_backend();
  return backend.empty() ? "sdpa" : "sdpa (" + backend + ")";
}

}  // namespace vramlab::worker
