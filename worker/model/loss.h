// Causal language-modelling loss with HF semantics: position t predicts labels[t + 1], the last
// position predicts nothing, labels equal to -100 are ignored, cross-entropy in fp32, mean over the
// counted positions.
#ifndef VRAMLAB_WORKER_MODEL_LOSS_H_
#define VRAMLAB_WORKER_MODEL_LOSS_H_

#include <cstdint>

#include <torch/torch.h>

#include "worker/model/qwen2_model.h"

namespace vramlab::worker {

enum class LossImpl {
  kFull,     // logits [b, s, vocab] in the parameter dtype, upcast to fp32 (what HF does)
  kChunked,  // lm_head + cross-entropy chunk_tokens rows at a time, recomputed in backward
};

constexpr int64_t kIgnoreIndex = -100;

// Returns a scalar fp32 loss. input_ids and labels are int64 [batch, seq]. chunk_tokens (> 0) is
// used by kChunked only. A model with KernelsImpl::kFused computes the loss with kernels/'s fused
// linear + cross-entropy, chunk_tokens rows at a time with kChunked and all rows in one chunk
// with kFull. Throws std::invalid_argument for mismatched shapes or chunk_tokens <= 0.
torch::Tensor CausalLmLoss(Qwen2ForCausalLM& model, const torch::Tensor& input_ids,
                           const torch::Tensor& labels, LossImpl impl, int64_t chunk_tokens);

// labels [b, s] -> [b, s] with row t holding labels[t + 1] and the last column kIgnoreIndex (HF's
// ForCausalLMLoss shift).
torch::Tensor ShiftLabels(const torch::Tensor& labels);

// Mean cross-entropy of (hidden [n, h] x weight[v, h]^T) against targets [n] (kIgnoreIndex rows
// skipped), computed chunk_tokens rows at a time. Never holds more than one chunk of logits;
// backward recomputes each chunk's logits. Gradients flow to hidden and weight.
torch::Tensor ChunkedLinearCrossEntropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                        const torch::Tensor& targets, int64_t chunk_tokens);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_LOSS_H_
