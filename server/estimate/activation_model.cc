#include "server/estimate/activation_model.h"

#include <algorithm>

namespace vramlab::server::estimate {
namespace {

constexpr int64_t kFp32 = 4;
constexpr int64_t kInt64 = 8;

// Shorthands for one micro-batch of `run`; every tensor size goes through the allocator rounding.
struct Sizes {
  explicit Sizes(const RunSettings& r)
      : run(r),
        e(r.dtype_bytes),
        tokens(r.micro_batch * r.seq_len),
        h(r.model.hidden_size),
        i(r.model.intermediate_size),
        scores(r.micro_batch * r.model.num_heads * r.seq_len * r.seq_len) {}
  int64_t Alloc(int64_t elements, int64_t bytes_per_element) const {
    return AllocatedBytes(run.device, elements * bytes_per_element);
  }
  // Hidden-state-shaped tensor in the run dtype.
  int64_t Hidden() const { return Alloc(tokens * h, e); }
  int64_t Inter() const { return Alloc(tokens * i, e); }

  const RunSettings& run;
  int64_t e, tokens, h, i, scores;
};

// HF's Qwen2RMSNorm: x32 = x.to(fp32); r = rsqrt(x32.pow(2).mean(-1) + eps);
// out = weight * (x32 * r).to(dtype). Saved: x32 (pow, mul), r, the normalized cast (weight
// mul) and out (the next linear's input). In fp32 the casts are no-ops and x32 is x itself.
int64_t RmsNormSaved(const Sizes& z) {
  return z.Alloc(z.tokens * z.h, kFp32) + z.Alloc(z.tokens, kFp32) + 2 * z.Hidden();
}

}  // namespace

int64_t StepConstantBytes(const RunSettings& run) {
  const Sizes z(run);
  const int64_t ids_and_labels = 2 * z.Alloc(z.tokens, kInt64);
  const int64_t rope = 2 * z.Alloc(run.seq_len * run.model.head_dim(), z.e);  // cos, sin
  const int64_t mask = run.eager_attention ? z.Alloc(run.seq_len * run.seq_len, z.e) : 0;
  return ids_and_labels + rope + mask;
}

LayerActivations EstimateLayerActivations(const RunSettings& run) {
  const Sizes z(run);
  const bool upcast = z.e < kFp32;
  LayerActivations a;

  // q after RoPE, k and v repeated to every head (the matmuls or sdpa save them), and the
  // attention output made contiguous for o_proj.
  const int64_t qkv = 3 * z.Hidden();
  const int64_t context = z.Hidden();
  int64_t attention_core_saved = 0;   // saved inside softmax(QK^T)V
  int64_t attention_fwd_extra = 0;    // transient above it while it runs
  int64_t attention_bwd_extra = 0;    // transient in its backward
  if (run.eager_attention) {
    // Saved: fp32 softmax output (softmax backward) and its cast to the dtype (PV matmul).
    const int64_t probs32 = z.Alloc(z.scores, kFp32);
    const int64_t probs = upcast ? z.Alloc(z.scores, z.e) : 0;
    attention_core_saved = probs32 + probs;
    // While softmax runs: the masked scores in the dtype and their fp32 upcast.
    attention_fwd_extra = z.Alloc(z.scores, z.e) + (upcast ? z.Alloc(z.scores, kFp32) : 0);
    // Backward: the probabilities' gradient in fp32 and softmax_backward's fp32 output.
    attention_bwd_extra = 2 * z.Alloc(z.scores, kFp32);
  } else {
    // Fused attention saves its output and the fp32 log-sum-exp per head and query.
    const int64_t lse = z.Alloc(run.micro_batch * run.model.num_heads * run.seq_len, kFp32);
    attention_core_saved = z.Hidden() + lse;
    // Backward: gradients of q, k and v.
    attention_bwd_extra = 3 * z.Hidden();
  }
  // SwiGLU: gate and up projections, silu(gate), and their product (down_proj's input).
  const int64_t mlp = 4 * z.Inter();
  const int64_t norms = 2 * RmsNormSaved(z);

  a.saved = norms + qkv + attention_core_saved + context + mlp;
  const int64_t before_core = RmsNormSaved(z) + qkv;
  // The layer's input and its residual sum are live while it runs (not saved: the RMSNorm upcast
  // keeps its own fp32 copy).
  a.forward_peak = std::max(a.saved, before_core + attention_core_saved + attention_fwd_extra) +
                   2 * z.Hidden();
  // Without autograd only the tensor being produced and its inputs are live: the attention
  // core's transient, or gate, up and their product in the MLP.
  const int64_t no_grad_attention =
      2 * z.Hidden() + qkv + (run.eager_attention ? z.Alloc(z.scores, z.e) + z.Alloc(z.scores, kFp32) +
                                                        attention_core_saved
                                                  : attention_core_saved);
  a.no_grad_peak = std::max(no_grad_attention, 3 * z.Inter() + z.Hidden());
  // Backward: the incoming gradient of the hidden states and the residual gradient being summed
  // (two hidden-sized tensors), plus the largest internal transient: the attention core's, or
  // the MLP's gradients of gate, up and their product.
  const int64_t mlp_bwd_extra = 3 * z.Inter();
  a.backward_peak = a.saved + 2 * z.Hidden() + std::max(attention_bwd_extra, mlp_bwd_extra);
  a.checkpoint_input = z.Hidden();
  return a;
}

LossActivations EstimateLossActivations(const RunSettings& run) {
  const Sizes z(run);
  const int64_t vocab = run.model.vocab_size;
  const int64_t rows = run.chunked_loss ? std::min(z.tokens, run.loss_chunk_tokens) : z.tokens;
  const int64_t logits = z.Alloc(rows * vocab, z.e);
  const int64_t logits32 = z.e < kFp32 ? z.Alloc(rows * vocab, kFp32) : 0;
  const int64_t logp = z.Alloc(rows * vocab, kFp32);
  LossActivations l;
  const int64_t final_norm = RmsNormSaved(z);
  if (run.chunked_loss) {
    // Each chunk is recomputed in backward: only the final norm's tensors are kept.
    l.saved = final_norm;
    l.forward_peak = final_norm + logits + logits32 + logp;
    // Backward of one chunk: its recomputed logits and log-probs, their fp32 gradient, the cast
    // gradient of the logits, and the gradient of the hidden states.
    l.backward_peak = final_norm + logits + logp + z.Alloc(rows * vocab, kFp32) + logits +
                      z.Hidden();
  } else {
    // The dtype logits stay referenced by the loop; log_softmax saves its fp32 output.
    l.saved = final_norm + logits + logp;
    l.forward_peak = final_norm + logits + logits32 + logp;
    // nll_loss backward's fp32 gradient and log_softmax_backward's fp32 output, then its cast.
    l.backward_peak = l.saved + 2 * z.Alloc(rows * vocab, kFp32);
  }
  return l;
}

}  // namespace vramlab::server::estimate
