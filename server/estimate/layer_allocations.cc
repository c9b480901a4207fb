#include "server/estimate/layer_allocations.h"

#include <algorithm>

#include "server/estimate/activation_model.h"
#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"

namespace vramlab::server::estimate {
namespace {
constexpr int64_t kFp32 = 4;
}  // namespace

StepTensorSizes::StepTensorSizes(const RunSettings& r) {
  const ModelShape& m = r.model;
  const int64_t b = r.micro_batch, s = r.seq_len, t = b * s, e = r.dtype_bytes;
  auto alloc = [&](int64_t n) { return AllocatedBytes(r.device, n); };
  upcast = e < kFp32;
  hidden = alloc(t * m.hidden_size * e);
  hidden32 = alloc(t * m.hidden_size * kFp32);
  per_token32 = alloc(t * kFp32);
  q = alloc(t * m.q_dim() * e);
  kv = alloc(t * m.kv_dim() * e);
  inter = alloc(t * m.intermediate_size * e);
  scores = alloc(b * m.num_heads * s * s * e);
  scores32 = alloc(b * m.num_heads * s * s * kFp32);
  lse = alloc(b * m.num_heads * s * kFp32);
  const int64_t chunk = r.chunked_loss ? std::min(t, r.loss_chunk_tokens) : t;
  chunks = (t + chunk - 1) / chunk;
  logits = alloc(chunk * m.vocab_size * e);
  logits32 = alloc(chunk * m.vocab_size * kFp32);
}

LayerAllocations::LayerAllocations(const RunSettings& run, AllocationLog* log)
    : run_(run),
      log_(log),
      z_(run),
      kept_(EstimateLayerActivations(run).kept),
      projections_(run, log) {}

// A norm's saved tensors (activation_model.cc NormSaved), after its fp32 product; the first is
// h = x.to(fp32). h.pow(2) lives until its mean is taken. Returns the output (the weight times the
// cast), made before the fp32 product goes as the call returns (the recorded traces' order).
int64_t LayerAllocations::Norm(std::vector<int64_t>* saved) {
  saved->push_back(log_->A(z_.upcast ? z_.hidden32 : 0));
  log_->T(z_.hidden32);
  saved->push_back(log_->A(z_.per_token32));
  const int64_t product = log_->A(z_.upcast ? z_.hidden32 : 0);
  const int64_t normalized = log_->A(z_.hidden);
  if (run_.adapter.enabled()) {
    log_->F(product);
    log_->T(z_.hidden);  // the frozen weight's product only
    log_->F(normalized);
    return log_->A(z_.hidden);
  }
  saved->push_back(normalized);
  const int64_t out = log_->A(z_.hidden);
  log_->F(product);
  return out;
}
// RMSNorm's backward, to the fp32 gradient of h (returned; the caller frees it after the cast
// to the input's dtype): the cast's fp32 gradient; h * r's two (r's reduced to r's shape and
// freed); mean's expanded gradient; pow's h.pow(1), 2 * that and the product, which is added
// into h's gradient in place. Pow's node frees the saved h (the first of `saved`).
int64_t LayerAllocations::NormBackward(std::vector<int64_t>* saved) {
  const int64_t H32 = z_.hidden32;
  const int64_t cast = log_->A(H32), r = log_->A(H32), h = log_->A(H32);
  log_->F(r), log_->F(cast);
  const int64_t mean = log_->A(H32), pow1 = log_->A(H32), twice = log_->A(H32),
                product = log_->A(H32);
  log_->F(twice), log_->F(pow1), log_->F(mean);
  log_->Drop(saved, 0);
  log_->F(product);
  return h;
}

int64_t LayerAllocations::Forward(int64_t x, LayerSaved* layer) {
  const int64_t H = z_.hidden, KV = z_.kv;
  std::vector<int64_t>* saved = &layer->norm1;
  const int64_t n1 = Norm(saved);
  saved->push_back(n1);  // norm 1's output, saved by the projections
  saved = &layer->attention;
  const int64_t q = projections_.Forward(kQ);
  log_->BlasWorkspace(kForwardThread);  // fetched by the first matmul, after its output
  const int64_t k = projections_.Forward(kK), v = projections_.Forward(kV);
  const int64_t qr = Rotary(q, z_.q), kr = Rotary(k, KV);
  if (run_.eager_attention) {
    // k and v repeated to every head, matmul's contiguous copy of q (saved at the kEager*
    // places); scores = matmul(q, k^T) * scaling, then scores + mask, each freeing the one
    // before; softmax's fp32 copy and its fp32 output, the cast; the output and its contiguous
    // copy; the masked scores go at the return.
    for (int i = 0; i < 3; ++i) saved->push_back(log_->A(z_.q));
    const int64_t product = log_->A(z_.scores), scaled = log_->A(z_.scores);
    log_->F(product);
    const int64_t masked = log_->A(z_.scores);
    log_->F(scaled);
    const int64_t copy = log_->A(z_.upcast ? z_.scores32 : 0);
    saved->push_back(log_->A(z_.scores32));
    log_->F(copy);
    saved->push_back(log_->A(z_.upcast ? z_.scores : 0));
    const int64_t o = log_->A(z_.q);
    saved->push_back(log_->A(z_.q));
    log_->F(o), log_->F(masked), log_->F(qr), log_->F(kr), log_->F(v);
  } else {
    // The fused kernel's output and log-sum-exp; q, k and v stay saved.
    saved->push_back(qr);
    saved->push_back(kr);
    saved->push_back(v);
    saved->push_back(log_->A(z_.q));
    saved->push_back(log_->A(z_.lse));
  }
  const int64_t attn = projections_.Forward(kO);
  const int64_t h = log_->A(H);  // x + attn
  log_->F(attn);
  log_->F(x);
  const int64_t n2 = Norm(&layer->norm2);
  layer->mlp.push_back(n2);  // norm 2's output
  // SwiGLU, silu(gate_proj(x)) * up_proj(x) with the right operand first: up, gate, silu(gate),
  // the product (the kMlp* places); then down_proj and the residual.
  layer->mlp.push_back(projections_.Forward(kUp));
  layer->mlp.push_back(projections_.Forward(kGate));
  for (int i = 0; i < 2; ++i) layer->mlp.push_back(log_->A(z_.inter));
  if (run_.eager_attention) {
    // Two fp32 hidden-sized tensors per layer the op walk does not explain (measured:
    // activation_model.cc kUnexplainedFp32HiddenPerLayer).
    layer->extra.push_back(log_->A(z_.hidden32));
    layer->extra.push_back(log_->A(z_.hidden32));
  }
  const int64_t down = projections_.Forward(kDown);
  const int64_t out = log_->A(H);
  log_->F(down);
  log_->F(h);
  int64_t listed = 0;
  for (const auto* part :
       {&layer->norm1, &layer->attention, &layer->norm2, &layer->mlp, &layer->extra}) {
    for (int64_t id : *part) listed += log_->BytesOf(id);
  }
  TopUp(listed, kept_, &layer->extra);
  return out;
}

void LayerAllocations::TopUp(int64_t listed, int64_t kept, std::vector<int64_t>* saved) {
  if (kept > listed) saved->push_back(log_->A(kept - listed));
}

// The worker's C++ keeps a call's temporaries until its full expression ends: norm 1's output
// until h = x + attention(...) is made, SwiGLU's four intermediate tensors until down_proj's output
// is (worker/model/qwen2_layers.cc).
int64_t LayerAllocations::ForwardNoGrad(int64_t x) {
  const int64_t H = z_.hidden;
  const int64_t n1 = NormNoGrad();
  const int64_t q0 = projections_.Forward(kQ);
  log_->BlasWorkspace(kForwardThread);
  const int64_t k0 = projections_.Forward(kK), v = projections_.Forward(kV);
  const int64_t q = Rotary(q0, z_.q), k = Rotary(k0, z_.kv);
  int64_t o = -1;
  if (run_.eager_attention) {
    // As with autograd (LayerForward), nothing saved: the fp32 output goes after its cast, the
    // masked scores and probabilities at the return.
    const int64_t kr = log_->A(z_.q), vr = log_->A(z_.q);
    const int64_t product = log_->A(z_.scores), scaled = log_->A(z_.scores);
    log_->F(product);
    const int64_t s = log_->A(z_.scores);
    log_->F(scaled);
    const int64_t s32 = log_->A(z_.upcast ? z_.scores32 : 0);
    const int64_t p32 = log_->A(z_.scores32);
    log_->F(s32);
    const int64_t p = log_->A(z_.upcast ? z_.scores : 0);
    log_->F(p32);
    o = log_->A(z_.q);
    log_->F(p), log_->F(s), log_->F(kr), log_->F(vr);
  } else {
    o = log_->A(z_.q);  // without autograd the fused kernel keeps no log-sum-exp
  }
  // o_proj's output; then the attention's locals go (out, v, k, q), h = x + attn is made and
  // the call's temporaries go.
  const int64_t attn = projections_.Forward(kO);
  log_->F(o), log_->F(v), log_->F(k), log_->F(q);
  const int64_t h = log_->A(H);
  log_->F(attn), log_->F(n1);
  const int64_t n2 = NormNoGrad();
  const int64_t g = projections_.Forward(kGate), s = log_->A(z_.inter),
                u = projections_.Forward(kUp), pr = log_->A(z_.inter);
  const int64_t d = projections_.Forward(kDown);
  log_->F(pr), log_->F(u), log_->F(s), log_->F(g);
  const int64_t out = log_->A(H);
  log_->F(d), log_->F(n2), log_->F(h);
  (void)x;  // kept: the checkpoint's saved input
  return out;
}

// RMSNorm without autograd (qwen2_layers.cc RMSNormImpl::forward): h = x in fp32, its pow(2)
// until the mean is taken, h * rsqrt(...) replacing h, then the cast to the dtype and the weight's
// product, the cast going as the product is made and the fp32 h as the call returns.
int64_t LayerAllocations::NormNoGrad() {
  const int64_t h = log_->A(z_.upcast ? z_.hidden32 : 0);
  log_->T(z_.hidden32);
  const int64_t rstd = log_->A(z_.per_token32);
  const int64_t scaled = log_->A(z_.upcast ? z_.hidden32 : 0);
  log_->F(h);
  const int64_t cast = log_->A(z_.hidden), out = log_->A(z_.hidden);
  log_->F(cast), log_->F(scaled), log_->F(rstd);
  return out;
}

// x * cos + rotate_half(x) * sin (qwen2_layers.cc ApplyRotary), as the recorded traces order it:
// rotate_half's negated half and its concatenation, the two products, the sum; the products and
// the concatenation go as the call returns, x as its caller's statement ends.
int64_t LayerAllocations::Rotary(int64_t x, int64_t bytes) {
  const int64_t negated = log_->A(AllocatedBytes(run_.device, bytes / 2));
  const int64_t rotated = log_->A(bytes);
  log_->F(negated);
  const int64_t by_sin = log_->A(bytes), by_cos = log_->A(bytes);
  const int64_t sum = log_->A(bytes);
  log_->F(by_cos), log_->F(by_sin), log_->F(rotated), log_->F(x);
  return sum;
}

int64_t LayerAllocations::Backward(int64_t gout, LayerSaved* saved,
                                   const LayerGradients& gradients) {
  const int64_t H = z_.hidden;
  std::vector<int64_t>& mlp = saved->mlp;
  // Each linear's weight gradient comes before its input's; each node frees what it saved once
  // it has run. down_proj: its input's gradient; the product freed.
  gradients("mlp.down_proj");
  const int64_t gd = projections_.Backward(kDown);
  log_->Drop(&mlp, kMlpProduct);
  // silu(gate) * up: the gradients of up and of silu(gate); then silu's, gate's gradient.
  const int64_t gu = log_->A(z_.inter), gs = log_->A(z_.inter);
  log_->F(gd);
  log_->Drop(&mlp, kMlpUp), log_->Drop(&mlp, kMlpSilu);
  const int64_t gg = log_->A(z_.inter);
  log_->F(gs);
  log_->Drop(&mlp, kMlpGate);
  // gate_proj (the later node), then up_proj; their input gradients summed.
  gradients("mlp.gate_proj");
  const int64_t gmlp = projections_.Backward(kGate);
  log_->F(gg);
  gradients("mlp.up_proj");
  projections_.AccumulatedBackward(kUp);
  log_->F(gu);
  log_->FreeAll(&mlp);
  gradients("post_attention_layernorm");
  const int64_t h32 = NormBackward(&saved->norm2);
  const int64_t gh = log_->A(H);
  log_->F(h32);
  log_->F(gmlp);
  log_->FreeAll(&saved->norm2);
  gradients("self_attn.o_proj");
  const int64_t go = projections_.Backward(kO);
  int64_t gq = -1, gk = -1, gv = -1, gkr = -1, gvr = -1;
  if (run_.eager_attention) {
    std::vector<int64_t>* att = &saved->attention;
    log_->Drop(att, kEagerOutput);
    // matmul(probs, values): the gradients of the values and of the probabilities (bf16).
    gv = log_->A(z_.q);
    const int64_t gp = log_->A(z_.scores);
    log_->Drop(att, kEagerValues), log_->Drop(att, kEagerProbs);
    // The cast's fp32 gradient; softmax_backward's fp32 result (its fp32 workspace, in the
    // recorded traces, is not listed: the step walk does not count it); the cast back to the
    // dtype; the gradient through `* scaling`.
    const int64_t gp32 = log_->A(z_.upcast ? z_.scores32 : 0);
    log_->F(gp);
    const int64_t gs32 = log_->A(z_.scores32);
    log_->F(gp32);
    log_->Drop(att, kEagerProbs32);
    const int64_t gs = log_->A(z_.upcast ? z_.scores : 0);
    log_->F(gs32);
    const int64_t gm = log_->A(z_.scores);
    log_->F(gs);
    gq = log_->A(z_.q), gk = log_->A(z_.q);
    log_->F(gm), log_->F(go);
    log_->FreeAll(att);
  } else {
    gq = log_->A(z_.q), gk = log_->A(z_.q), gv = log_->A(z_.q);
    log_->T(z_.hidden32);  // the fp32 dq accumulator
    gkr = log_->A(z_.kv), gvr = log_->A(z_.kv);
    log_->F(gk), log_->F(gv), log_->F(go);
    gk = gv = -1;
    log_->FreeAll(&saved->attention);
  }
  // repeat_kv's backward and rotary's temporaries; then v_proj, k_proj, q_proj.
  log_->T(z_.q), log_->T(z_.q);
  const int64_t gx = projections_.Backward(kV);
  gradients("self_attn.v_proj");
  projections_.AccumulatedBackward(kK);
  gradients("self_attn.k_");
  projections_.AccumulatedBackward(kQ);
  gradients("self_attn.q_");
  log_->F(gq), log_->F(gk), log_->F(gv), log_->F(gkr), log_->F(gvr);
  gradients("");  // input_layernorm (and any tensor not named above)
  log_->F(NormBackward(&saved->norm1));
  log_->FreeAll(&saved->norm1);
  log_->FreeAll(&saved->extra);
  log_->F(gh);
  log_->F(gout);
  return gx;
}

}  // namespace vramlab::server::estimate
