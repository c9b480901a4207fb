// The Qwen2 causal language model (HF transformers' Qwen2ForCausalLM) as torch::nn modules.
//
// Parameter names (named_parameters()) are exactly HF's: "model.embed_tokens.weight",
// "model.layers.<i>.self_attn.{q,k,v}_proj.{weight,bias}",
// "model.layers.<i>.self_attn.o_proj.weight", "model.layers.<i>.mlp.{gate,up,down}_proj.weight",
// "model.layers.<i>.{input,post_attention}_layernorm.weight", "model.norm.weight" and, only when
// the embeddings are untied, "lm_head.weight". The safetensors loader and the optimizers rely on
// this. A tied model has one embedding parameter serving as lm_head; its gradient gets both
// contributions.
//
// The constructor allocates every parameter on options.device in options.dtype *uninitialized*
// (like HF's meta-device loading) so that a 7B model never exists twice: call InitializeWeights
// (worker/model/init.h) or LoadSafetensorsDir (worker/safetensors/loader.h) before use.
#ifndef VRAMLAB_WORKER_MODEL_QWEN2_MODEL_H_
#define VRAMLAB_WORKER_MODEL_QWEN2_MODEL_H_

#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/model/qwen2_config.h"
#include "worker/model/qwen2_layers.h"
#include "worker/model/unit_hooks.h"

namespace vramlab::worker {

struct ModelOptions {
  AttentionImpl attention = AttentionImpl::kEager;
  // 0: no activation checkpointing; 1: every decoder layer; k: layers 0, k, 2k, ...
  int checkpoint_every_k_layers = 0;
  // sdpa on LibTorch >= 2.5: hand K/V to the kernel un-repeated with enable_gqa, as HF does on
  // torch >= 2.5 when there is no padding mask, instead of repeating the kv heads first (which
  // saves two [b, heads, s, d] copies per layer for backward). Ignored elsewhere.
  bool sdpa_native_gqa = true;
  // kFused: RMSNorm, rotary, SwiGLU and the loss (loss.h) from kernels/ (CUDA only).
  KernelsImpl kernels = KernelsImpl::kAten;
  torch::Dtype dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
};

// Qwen2Model: embeddings, decoder layers, final norm.
class Qwen2ModelImpl : public torch::nn::Module {
 public:
  explicit Qwen2ModelImpl(const DecoderConfig& config, const ModelOptions& options = {});

  // Final-normed hidden states [batch, seq, hidden] for input_ids [batch, seq] (int64).
  torch::Tensor forward(const torch::Tensor& input_ids);

  // kSdpa only where LibTorch has it; kEager otherwise.
  AttentionImpl EffectiveAttention() const;
  // The fused sdpa backend the last forward chose ("" before any sdpa forward).
  const std::string& sdpa_backend() const { return sdpa_backend_; }
  // Set when a layer draws random numbers (adapter dropout); see DecoderInputs.
  void set_preserve_rng_state(bool preserve) { preserve_rng_state_ = preserve; }
  // The decoder layers in order (the same modules as `layers`).
  const std::vector<Qwen2DecoderLayer>& decoder_layers() const { return decoder_layers_; }
  // Called around the root and each layer in every forward (unit_hooks.h); null (the default):
  // none. `hooks` outlives the model's forwards and backwards.
  void set_unit_hooks(ForwardUnitHooks* hooks) { unit_hooks_ = hooks; }

  Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};  // registered for the names; same modules as below
  RMSNorm norm{nullptr};

 private:
  DecoderConfig config_;
  ModelOptions options_;
  std::vector<Qwen2DecoderLayer> decoder_layers_;
  std::string sdpa_backend_;
  bool preserve_rng_state_ = false;
  ForwardUnitHooks* unit_hooks_ = nullptr;
};
TORCH_MODULE(Qwen2Model);

class Qwen2ForCausalLMImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument for an invalid config or options.
  explicit Qwen2ForCausalLMImpl(const DecoderConfig& config, const ModelOptions& options = {});

  // Final-normed hidden states [batch, seq, hidden] in the parameter dtype.
  torch::Tensor Hidden(const torch::Tensor& input_ids);
  // Logits [batch, seq, vocab] in the parameter dtype (HF upcasts only inside the loss).
  torch::Tensor Logits(const torch::Tensor& input_ids);
  torch::Tensor forward(const torch::Tensor& input_ids) { return Logits(input_ids); }
  // The output projection [vocab, hidden]: the embedding matrix when tied.
  torch::Tensor LmHeadWeight();

  const DecoderConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  // "eager"; for sdpa the fused backend the last forward chose ("sdpa (flash)", "sdpa (cudnn,
  // native GQA)", ...) or "eager (sdpa unavailable on LibTorch <2)" where it fell back.
  std::string attention_backend() const;

  Qwen2Model model{nullptr};
  Linear lm_head{nullptr};  // null when tie_word_embeddings

 private:
  DecoderConfig config_;
  ModelOptions options_;
};
TORCH_MODULE(Qwen2ForCausalLM);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_QWEN2_MODEL_H_
