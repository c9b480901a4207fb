#include "server/estimate/activation_model.h"

#include <algorithm>

#include "server/estimate/adapter_model.h"

namespace vramlab::server::estimate {
namespace {

constexpr int64_t kFp32 = 4;
constexpr int64_t kInt64 = 8;
constexpr int64_t kUnexplainedFp32HiddenPerLayer = 2;

// Sizes of the tensors of one micro-batch (b sequences of s tokens), each rounded the way the
// device's allocator accounts it.
struct Sizes {
  explicit Sizes(const RunSettings& r) : run(r) {
    const ModelShape& m = r.model;
    const int64_t b = r.micro_batch, s = r.seq_len, t = b * s, e = r.dtype_bytes;
    upcast = e < kFp32;
    hidden = Alloc(t * m.hidden_size * e);
    hidden32 = Alloc(t * m.hidden_size * kFp32);
    per_token32 = Alloc(t * kFp32);
    kv = Alloc(t * m.kv_dim() * e);
    q = Alloc(t * m.q_dim() * e);
    q32 = Alloc(t * m.q_dim() * kFp32);
    kv32 = Alloc(t * m.kv_dim() * kFp32);
    q_rows32 = Alloc(t * m.num_heads * kFp32);
    kv_rows32 = Alloc(t * m.num_kv_heads * kFp32);
    inter = Alloc(t * m.intermediate_size * e);
    scores = Alloc(b * m.num_heads * s * s * e);
    scores32 = Alloc(b * m.num_heads * s * s * kFp32);
    lse = Alloc(b * m.num_heads * s * kFp32);
    const int64_t chunk = r.chunked_loss ? std::min(t, r.loss_chunk_tokens) : t;
    logits = Alloc(chunk * m.vocab_size * e);
    logits32 = Alloc(chunk * m.vocab_size * kFp32);
  }
  int64_t Alloc(int64_t nbytes) const { return AllocatedBytes(run.device, nbytes); }

  const RunSettings& run;
  bool upcast;  // dtype narrower than fp32: RMSNorm and softmax make fp32 copies
  int64_t hidden, hidden32, per_token32, kv, inter, scores, scores32, lse, logits, logits32;
  // q-sized tensors ([b, s, heads * head_dim]: hidden-sized unless head_dim is explicit), and the
  // fp32 copies and per-head rows of qwen3's q/k norms.
  int64_t q, q32, kv32, q_rows32, kv_rows32;
};

// qwen3's q_norm and k_norm (RMSNorm over each head, before the rotary embedding): as NormSaved,
// per head; with FUSED kernels the input and the fp32 rstd per row. 0 for the other families.
int64_t QkNormSaved(const RunSettings& run, const Sizes& z) {
  if (!run.model.qk_norm) return 0;
  if (run.fused_kernels) return z.q + z.q_rows32 + z.kv + z.kv_rows32;
  const int64_t casts = run.adapter.enabled() ? 0 : z.q + z.kv;
  return z.q32 + z.q_rows32 + z.kv32 + z.kv_rows32 + casts;
}
// The norms' fp32 products while the casts run, and their backward's fp32 gradients.
int64_t QkNormTransient(const RunSettings& run, const Sizes& z) {
  if (!run.model.qk_norm || run.fused_kernels) return 0;
  return 3 * (z.q32 + z.kv32);
}

// Qwen2RMSNorm (worker/model/qwen2_layers.cc): h32 = x.to(fp32); r = rsqrt(mean(h32^2) + eps);
// out = weight * (h32 * r).to(dtype). Autograd saves h32 (pow, mul), r, and the normalized cast
// (weight mul); in fp32 the casts are no-ops and h32 is x itself. The output is counted by its
// consumer (the projections save it).
int64_t NormSaved(const Sizes& z) { return z.hidden32 + z.per_token32 + z.hidden; }
// With an adapter the norm weights are frozen: autograd does not save the normalized input that
// only the weight's gradient needs.
int64_t NormSaved(const RunSettings& run, const Sizes& z) {
  return NormSaved(z) - (run.adapter.enabled() ? z.hidden : 0);
}
// The fp32 product h32 * r, alive until the cast returns.
int64_t NormForwardTransient(const Sizes& z) { return z.upcast ? z.hidden32 : 0; }
// Backward of the norm: the gradient through the cast in fp32, through the product, through
// mean/pow; a few fp32 hidden-sized tensors at once.
int64_t NormBackwardTransient(const Sizes& z) { return 3 * z.hidden32; }

// Attention's saved tensors. Eager: the contiguous copy of q that matmul makes (q is a transposed
// view), k and v repeated to every head, the fp32 softmax output, its cast to the dtype (not in
// fp32, where the cast is the same tensor), and the contiguous attention output o_proj saves.
// Fused: q, k and v as the kernel gets them (un-repeated: the worker passes enable_gqa on
// LibTorch >= 2.5, as HF does), the output (already contiguous in [b, s, heads, d], so o_proj
// saves the same tensor) and the fp32 log-sum-exp.
int64_t AttentionSaved(const Sizes& z) {
  if (z.run.eager_attention) return 4 * z.q + z.scores32 + (z.upcast ? z.scores : 0);
  return 2 * z.q + 2 * z.kv + z.lse;
}

// Attention's forward moment with autograd, given `base`: what the layer holds above its input
// when the attention kernel starts (norm 1's tensors, q and k after RoPE, v and, for eager, k
// and v repeated to every head).
int64_t AttentionForwardMoment(const Sizes& z, int64_t base) {
  const int64_t H = z.hidden;
  if (!z.run.eager_attention) return base + H + z.lse;
  // softmax(scores, dtype=fp32): masked scores, their fp32 copy and the fp32 output live
  // together, with matmul's copy of q; then the cast of the probabilities and the output.
  const int64_t softmax = base + H + z.scores + (z.upcast ? z.scores32 : 0) + z.scores32;
  const int64_t output = base + H + z.scores + z.scores32 + (z.upcast ? z.scores : 0) + 2 * H;
  return std::max(softmax, output);
}

// The same without autograd (a checkpointed layer's forward).
int64_t AttentionNoGradMoment(const Sizes& z, int64_t base) {
  const int64_t H = z.hidden;
  if (!z.run.eager_attention) return base + H + z.lse;
  const int64_t softmax = base + z.scores + (z.upcast ? z.scores32 : 0) + z.scores32;
  const int64_t cast = base + z.scores + z.scores32 + (z.upcast ? z.scores : 0);
  const int64_t output = base + z.scores + (z.upcast ? z.scores : z.scores32) + 2 * H;
  return std::max({softmax, cast, output});
}

// Attention's backward moment, given `left`: what of the layer is left when backward reaches
// attention (norm 1 and its output).
int64_t AttentionBackwardMoment(const Sizes& z, int64_t left) {
  const int64_t H = z.hidden;
  if (z.run.eager_attention) {
    // softmax_backward: the saved fp32 output, the fp32 gradient of the probabilities and the
    // fp32 result, with q's copy, repeated k, the residual gradient and v's gradient.
    return left + 2 * H + z.scores32 + 2 * H + 2 * z.scores32;
  }
  // Fused backward: saved q, k, v, output, lse; gradients of the residual and the output; dq,
  // dk and dv per query head, reduced to the kv heads; the fp32 dq accumulator and the softmax
  // row sums of flash attention.
  return left + AttentionSaved(z) + 2 * H + 3 * H + 2 * z.kv + z.hidden32 + z.lse;
}

LayerActivations AtenLayerActivations(const RunSettings& run, const Sizes& z) {
  const int64_t H = z.hidden, KV = z.kv, I = z.inter;
  const int64_t norm = NormSaved(run, z);
  // qwen3: the q/k norms' saved tensors are part of attention's.
  const int64_t attention = AttentionSaved(z) + QkNormSaved(run, z);
  LayerActivations a;
  a.hidden = H;
  a.checkpoint_input = H;
  // Norms + their outputs, attention, SwiGLU and, with eager attention, two more fp32 hidden-size
  // tensors per decoder layer beyond the op walk above: measured on the CPU (LibTorch 1.13, where
  // attention is always eager; counting allocator), 2·4·T·h per layer in bf16 and fp32 alike,
  // independent of the kv heads and the vocabulary. sdpa on the GPU does not keep them: with
  // them its peaks came out 4–6 % high at every size, without them −0.9 % … 0.0 %
  // (docs/ESTIMATOR.md, "Accuracy").
  const int64_t extra = run.eager_attention ? kUnexplainedFp32HiddenPerLayer * z.hidden32 : 0;
  a.kept = 2 * (norm + H) + attention + 4 * I + extra;
  a.kept_unexplained = extra;

  // Forward with autograd; each moment is above what was live before (the input x included).
  const int64_t after_norm1 = norm + H;
  // q/k/v projections, then q's rotary embedding: x*cos, rotate_half(x), its product with sin
  // and their sum are live together (one C++ expression).
  const int64_t rotary =
      after_norm1 + 5 * H + 2 * KV + QkNormSaved(run, z) + QkNormTransient(run, z);
  // Inside attention: q after RoPE, k after RoPE, v and, for eager, k and v repeated to every head.
  const int64_t repeated_kv = run.eager_attention ? 2 * H : 0;
  const int64_t attention_moment =
      AttentionForwardMoment(z, after_norm1 + H + 2 * KV + repeated_kv);
  const int64_t norm2 =
      after_norm1 + attention + H /* h = x + attn */ + norm + H + NormForwardTransient(z);
  // End of the layer: everything saved, plus h, the MLP output and the layer output.
  const int64_t end = a.kept + 3 * H;
  a.forward_peak =
      std::max({after_norm1 + NormForwardTransient(z), rotary, attention_moment, norm2, end});

  // Forward without autograd: only what the expression being evaluated holds.
  const int64_t ng_norm = z.hidden32 + std::max(z.hidden32, 2 * H);
  const int64_t ng_attention =
      AttentionNoGradMoment(z, H /* norm output */ + H + 2 * KV + repeated_kv);
  const int64_t ng_mlp = 3 * H + 4 * I;  // h, norm output, gate, silu, up, product, MLP output
  a.no_grad_peak = std::max({ng_norm, H + 5 * H + 2 * KV, ng_attention, ng_mlp});

  // Backward, above what the layers below keep; the incoming gradient (H) is live throughout.
  // SwiGLU: down_proj's input gradient, then the gradients of silu(gate) and up.
  const int64_t mlp_bwd = a.kept + H + 2 * I;
  const int64_t norm2_bwd = a.kept - 4 * I + 2 * H + NormBackwardTransient(z);
  // What of the layer is left when backward reaches attention: norm 1 and its output.
  const int64_t left = norm + H + extra;
  const int64_t attention_bwd = AttentionBackwardMoment(z, left);
  // Rotary (and, for eager, repeat-kv) backward: gradients of q, k and v and the rotary
  // temporaries.
  const int64_t rotary_bwd = left + (run.eager_attention ? 9 * H : 7 * H + 2 * KV) +
                             QkNormSaved(run, z) + QkNormTransient(run, z);
  const int64_t norm1_bwd = norm + 2 * H + NormBackwardTransient(z);
  a.backward_peak = std::max({mlp_bwd, norm2_bwd, attention_bwd, rotary_bwd, norm1_bwd});
  return a;
}

// --- training.kernels FUSED (kernels/, docs/KERNELS.md)
// ------------------------------------------- FusedRmsNorm saves its input and the fp32 rstd per
// row; nothing else, and no forward transient.
int64_t FusedNormSaved(const Sizes& z) { return z.hidden + z.per_token32; }
// FusedSwiGlu saves gate and up (silu is recomputed); down_proj saves the product.
int64_t FusedMlpSaved(const Sizes& z) { return 3 * z.inter; }

// One decoder layer with FUSED kernels. Rotary (FusedRotary) saves nothing of its own and holds
// q and k twice only inside its call (projection output and rotated copy); the layer's input and
// its mid-layer residual are saved by the two norms, so they are part of `kept` here.
LayerActivations FusedLayerActivations(const RunSettings& run, const Sizes& z) {
  const int64_t H = z.hidden, KV = z.kv, pt = z.per_token32;
  const int64_t norm = FusedNormSaved(z);
  // qwen3: the q/k norms' saved tensors are part of attention's.
  const int64_t attention = AttentionSaved(z) + QkNormSaved(run, z);
  const int64_t mlp = FusedMlpSaved(z);
  const int64_t extra = run.eager_attention ? kUnexplainedFp32HiddenPerLayer * z.hidden32 : 0;
  LayerActivations a;
  a.hidden = H;
  a.checkpoint_input = H;
  a.kept = 2 * (norm + H) + attention + mlp + extra;
  a.kept_unexplained = extra;

  // Forward, above the live input (which norm 1 saves: its H is in `kept`, not in these moments).
  const int64_t after_norm1 = pt + H;
  const int64_t rotary = after_norm1 + 2 * H + 3 * KV;  // q, k, v, rotated q and k
  const int64_t repeated_kv = run.eager_attention ? 2 * H : 0;
  const int64_t attention_moment =
      AttentionForwardMoment(z, after_norm1 + H + 2 * KV + repeated_kv);
  // h = x + attn (saved by norm 2), its rstd and norm 2's output.
  const int64_t norm2 = after_norm1 + attention + H + pt + H;
  // Everything saved but the input, plus the MLP output and the layer output.
  const int64_t end = a.kept - H + 2 * H;
  a.forward_peak = std::max({rotary, attention_moment, norm2, end});

  // Without autograd: the expression being evaluated only.
  const int64_t ng_attention = AttentionNoGradMoment(z, H + H + 2 * KV + repeated_kv);
  const int64_t ng_mlp = 3 * H + 3 * z.inter;  // h, norm output, gate, up, product, MLP output
  a.no_grad_peak = std::max({pt + H, 3 * H + 3 * KV, ng_attention, ng_mlp});

  // Backward, above what the layers below keep; the incoming gradient (H) is live throughout.
  // SwiGLU: down_proj's input gradient, then the gradients of gate and up (one kernel).
  const int64_t mlp_bwd = a.kept + H + 3 * z.inter;
  // Norm 2: the residual gradient, the gradient of its output and its dx.
  const int64_t norm2_bwd = a.kept - mlp + 3 * H;
  const int64_t left = norm + H + extra;
  const int64_t attention_bwd = AttentionBackwardMoment(z, left);
  // Rotary backward: the residual gradient, dq and dk as attention returns them and rotated back,
  // dv, and the projections' input gradient.
  const int64_t rotary_bwd = left + 4 * H + 3 * KV + (run.eager_attention ? 2 * H : 0);
  const int64_t norm1_bwd = norm + 3 * H;
  a.backward_peak = std::max({mlp_bwd, norm2_bwd, attention_bwd, rotary_bwd, norm1_bwd});
  return a;
}

// Final norm and FusedLinearCrossEntropy. The loss's forward forms the gradients of hidden and of
// lm_head's weight (when lm_head trains: no adapter), one chunk of parameter-dtype logits at a
// time, and keeps only them; the final norm's output is not kept. lm_head's gradient is the one
// step_timeline.h adds once backward reaches the loss, so it is in the forward moments and
// `kept` here but not in the backward ones.
LossActivations FusedLossActivations(const RunSettings& run, const Sizes& z) {
  const int64_t H = z.hidden;
  const int64_t norm = FusedNormSaved(z);  // the last layer's output is the norm's saved input
  const int64_t head =
      run.adapter.enabled()
          ? 0
          : z.Alloc(run.model.vocab_size * run.model.hidden_size * run.dtype_bytes);
  LossActivations l;
  const int64_t base = norm + H;  // and the norm's output, until the loss returns
  // Per chunk: its logits, the per-row losses, and the two gradients.
  l.forward_peak = base + H + head + z.logits + z.per_token32;
  l.kept = norm + H + head;
  l.backward_peak_before_head_gradient = l.kept;
  // The hidden-state gradient into the final norm, and the norm's dx.
  l.backward_peak_with_head_gradient = norm + 2 * H;
  return l;
}

}  // namespace

StepInputs EstimateStepInputs(const RunSettings& run) {
  const Sizes z(run);
  const int64_t tokens = run.micro_batch * run.seq_len;
  StepInputs in;
  in.token_ids = z.Alloc(tokens * kInt64);
  const int64_t targets = z.Alloc(tokens * kInt64);  // labels shifted by one (loss.cc)
  in.rope_table = z.Alloc(run.seq_len * run.model.head_dim() * run.dtype_bytes);
  in.rope_freqs32 = z.Alloc(run.seq_len * run.model.head_dim() * 4);
  const int64_t mask =
      run.eager_attention ? z.Alloc(run.seq_len * run.seq_len * run.dtype_bytes) : 0;
  // A sliding window shorter than the sequence: its own mask beside the causal one, additive in
  // the dtype (eager) or boolean (sdpa), built once per forward (worker/model/qwen2_layers.cc).
  const int64_t window_mask =
      run.model.WindowedLayers(run.seq_len) == 0
          ? 0
          : z.Alloc(run.seq_len * run.seq_len * (run.eager_attention ? run.dtype_bytes : 1));
  in.masks = mask + window_mask;
  in.targets_and_masks = targets + in.masks;
  return in;
}

LayerActivations EstimateLayerActivations(const RunSettings& run) {
  const Sizes z(run);
  const int64_t H = z.hidden, KV = z.kv, I = z.inter;
  LayerActivations a =
      run.fused_kernels ? FusedLayerActivations(run, z) : AtenLayerActivations(run, z);
  const AdapterActivations adapters = EstimateAdapterActivations(run);
  if (!run.adapter.enabled()) return a;
  // Adapters: their saved tensors throughout, and one moment per wrapped projection, each the
  // projection's own forward or backward (adapter_model.h) on top of what the layer holds when it
  // runs. A projection that is not wrapped is the plain linear the moments above count.
  const auto& p = adapters.projection;
  auto wrapped = [&](AdapterProjection i) { return p[i].forward > 0; };
  const int64_t mlp_saved = run.fused_kernels ? FusedMlpSaved(z) : 4 * I;
  const int64_t mlp_adapters = p[kGate].kept + p[kUp].kept + p[kDown].kept;
  a.kept += adapters.kept;
  a.forward_peak += adapters.kept;
  a.backward_peak += adapters.kept;
  // What the layer keeps before its MLP (norm 2's saved tensors and output included).
  const int64_t before_mlp = a.kept - mlp_saved - mlp_adapters;
  // The two MLP inputs, silu(gate(x)) and up(x), are operands of one expression whose order of
  // evaluation C++ leaves open; the second of them runs with the first's output (and silu's,
  // ATEN) alive: mlp_saved - 2I. down_proj runs with all of the MLP's saved tensors alive (they
  // are temporaries of the same full-expression even without autograd).
  const int64_t second_input = mlp_saved - 2 * I;
  auto forward_moments = [&](int64_t base, bool with_autograd) {
    const int64_t k = with_autograd ? 1 : 0;  // without autograd nothing is saved
    int64_t m = 0;
    // Attention's projections: bounded by everything kept before the MLP, with the q, k and v
    // outputs.
    const int64_t attention_base = with_autograd ? before_mlp : H;
    for (AdapterProjection i : {kQ, kK, kV, kO}) {
      if (wrapped(i)) m = std::max(m, attention_base + H + 2 * KV + p[i].forward);
    }
    if (wrapped(kGate)) m = std::max(m, base + p[kGate].forward);
    if (wrapped(kUp)) m = std::max(m, base + k * p[kGate].kept + second_input + p[kUp].forward);
    if (wrapped(kDown)) {
      m = std::max(m, base + k * (p[kGate].kept + p[kUp].kept) + mlp_saved + p[kDown].forward);
    }
    return m;
  };
  // With autograd: the residual h (H) on top of what was kept before the MLP.
  a.forward_peak = std::max(a.forward_peak, forward_moments(before_mlp + H, true));
  // Without autograd (a checkpointed layer's forward): h and norm 2's output.
  a.no_grad_peak = std::max(a.no_grad_peak, forward_moments(2 * H, false));

  // Backward, above the layers below; the incoming gradient of the layer's output (H) is live
  // throughout. down_proj runs first, with everything the layer saved.
  const int64_t all = a.kept + H;
  int64_t b = 0;
  if (wrapped(kDown)) b = std::max(b, all + p[kDown].backward);
  // Then the SwiGLU backward: down_proj's input, silu(gate) and up (ATEN; FUSED: gate, up and
  // the product) are freed and the two I-sized gradients of gate and up wait: the first of
  // gate/up to run its backward has all - I live; the second runs with less.
  for (AdapterProjection i : {kGate, kUp}) {
    if (wrapped(i)) b = std::max(b, all - I + p[i].backward);
  }
  // Attention's projections, after the MLP is done: bounded by what was kept before the MLP, the
  // residual's gradient, and the gradients of q, k and v waiting for their projections.
  for (AdapterProjection i : {kQ, kK, kV, kO}) {
    if (wrapped(i)) b = std::max(b, before_mlp + 2 * H + H + 2 * KV + p[i].backward);
  }
  a.backward_peak = std::max(a.backward_peak, b);
  return a;
}

LossActivations EstimateLossActivations(const RunSettings& run) {
  const Sizes z(run);
  if (run.fused_kernels) return FusedLossActivations(run, z);
  const int64_t H = z.hidden;
  const int64_t norm = NormSaved(run, z);
  LossActivations l;
  // The last layer's output enters the final norm; afterwards only the norm's tensors and its
  // output (lm_head's input) remain.
  const int64_t norm_moment = H + norm + H + NormForwardTransient(z);
  const int64_t base = norm + H;
  const int64_t norm_bwd = base + H + NormBackwardTransient(z);
  if (run.chunked_loss) {
    // ChunkedCrossEntropy (worker/model/loss.cc), per chunk and without autograd: the dtype
    // logits and their fp32 copy (one tensor in fp32), then the softmax in place. The custom
    // function keeps only the hidden states it was given.
    const int64_t chunk_logits = z.logits32 + (z.upcast ? z.logits : 0);
    l.forward_peak = std::max(norm_moment, base + chunk_logits);
    l.kept = base;
    l.backward_peak_before_head_gradient = base;
    // Backward allocates the hidden-state gradient and the lm_head gradient first (zeros_like of
    // the weight: with an adapter the weight is frozen and step_timeline.h counts no head
    // gradient, so it is counted here), then per chunk the recomputed dtype logits and their
    // fp32 copy, softmax in place, and the fp32 gradient cast to the dtype before it is freed.
    const int64_t frozen_head =
        run.adapter.enabled()
            ? z.Alloc(run.model.vocab_size * run.model.hidden_size * run.dtype_bytes)
            : 0;
    l.backward_peak_with_head_gradient = std::max(base + H + frozen_head + chunk_logits, norm_bwd);
  } else {
    // Full: dtype logits, their fp32 upcast and log_softmax's fp32 output live together; only
    // the log-probabilities are saved (nll_loss and log_softmax backward need them).
    l.forward_peak =
        std::max(norm_moment, base + z.logits + (z.upcast ? z.logits32 : 0) + z.logits32);
    l.kept = base + z.logits32;
    // nll_loss backward's fp32 gradient and log_softmax_backward's fp32 result, with the saved
    // log-probabilities.
    l.backward_peak_before_head_gradient = base + 3 * z.logits32;
    // The cast gradient of the logits and the gradient of lm_head's input, while lm_head's
    // weight gradient is produced; then the final norm's backward.
    l.backward_peak_with_head_gradient = std::max(base + z.logits + H, norm_bwd);
  }
  return l;
}

}  // namespace vramlab::server::estimate
