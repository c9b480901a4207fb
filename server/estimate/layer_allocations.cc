#include "server/estimate/layer_allocations.h"

#include <algorithm>

#include "server/estimate/activation_model.h"
#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"
#include "server/estimate/reduction_staging.h"

namespace vramlab::server::estimate {
namespace {
constexpr int64_t kFp32 = 4;

// The step walk's saved bytes of a layer with autograd, less the eager tensors it keeps for the
// CPU's measurements that the recorded CUDA traces do not have.
int64_t KeptAsListed(const RunSettings& run) {
  const LayerActivations a = EstimateLayerActivations(run);
  return a.kept - a.kept_unexplained;
}

// A staging buffer of ReductionStagingBytes for a sum over `tokens` rows of `columns`, on CUDA.
int64_t Staging(const RunSettings& run, int64_t tokens, int64_t columns) {
  if (run.device != Device::kCuda) return 0;
  return AllocatedBytes(run.device, ReductionStagingBytes(tokens, columns));
}

// The fused attention's backward workspace on CUDA (cuDNN with native GQA): two fp32 tensors of
// q's shape, one fp32 value per head and token and 256 bytes more, one request. Measured:
// 404,226,304 B for Qwen2.5-1.5B at 32,768 tokens on an H100
// (testdata/estimator/traces/recorded_longest_native.trace).
constexpr int64_t kSdpaWorkspaceExtraBytes = 256;
int64_t SdpaBackwardWorkspace(const RunSettings& run) {
  if (run.device != Device::kCuda) return 0;
  const int64_t t = run.tokens();
  return AllocatedBytes(run.device, 2 * t * run.model.q_dim() * kFp32 +
                                        t * run.model.num_heads * kFp32 + kSdpaWorkspaceExtraBytes);
}
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
      kept_(KeptAsListed(run)),
      projections_(run, log),
      hidden_norm_(NormSizesOf(run.model.hidden_size, run.tokens())),
      q_norm_(NormSizesOf(run.model.head_dim(), run.tokens() * run.model.num_heads)),
      k_norm_(NormSizesOf(run.model.head_dim(), run.tokens() * run.model.num_kv_heads)),
      sdpa_workspace_(SdpaBackwardWorkspace(run)),
      sums_in_place_(run.adapter.qlora && !run.adapter.dropout) {
  for (int p = 0; p < kNumProjections; ++p) {
    const ProjectionFeatures f = FeaturesOf(run, static_cast<AdapterProjection>(p));
    bias_staging_[p] = Staging(run, run.tokens(), f.out);
    has_bias_[p] = f.bias;
  }
}

LayerAllocations::NormSizes LayerAllocations::NormSizesOf(int64_t width, int64_t rows) const {
  auto alloc = [&](int64_t n) { return AllocatedBytes(run_.device, n); };
  return {alloc(rows * width * run_.dtype_bytes), alloc(rows * width * kFp32), alloc(rows * kFp32),
          Staging(run_, rows, width)};
}

// A norm's saved tensors (activation_model.cc NormSaved): h = x.to(fp32), the rsqrt and the cast,
// in that order. As the recorded traces order it: h.pow(2) lives until its mean (the variance, a
// local) is made; variance + eps until the product h * rsqrt is; the output (the weight times
// the cast) is made before the variance and the fp32 product go as the call returns.
int64_t LayerAllocations::Variance(const NormSizes& n) {
  const int64_t squared = log_->A(n.x32);
  const int64_t variance = log_->A(n.rows32);
  log_->F(squared);
  return variance;
}

int64_t LayerAllocations::Norm(std::vector<int64_t>* saved, const NormSizes& n) {
  saved->push_back(log_->A(z_.upcast ? n.x32 : 0));
  const int64_t variance = Variance(n);
  const int64_t shifted = log_->A(n.rows32);
  saved->push_back(log_->A(n.rows32));
  const int64_t product = log_->A(z_.upcast ? n.x32 : 0);
  log_->F(shifted);
  const int64_t normalized = log_->A(n.x);
  const int64_t out = log_->A(n.x);
  if (run_.adapter.enabled()) {
    log_->F(normalized);  // a frozen weight's product saves nothing
  } else {
    saved->push_back(normalized);
  }
  log_->F(variance), log_->F(product);
  return out;
}

// RMSNorm's backward (qwen2_layers.cc RMSNormImpl::forward, the recorded traces' order): the
// weight's product first, weight * cast giving the cast's gradient and, when the weight trains,
// gout * cast summed over the tokens into the weight's gradient through a staging buffer; gout
// and the saved cast go. Then the cast's fp32 gradient; h * r's two (r's reduced to per token);
// rsqrt's and mean's per-token steps, which free r; mean's expanded gradient and pow's h.pow(1),
// 2 * that and the product, added into h's gradient in place as pow's node frees the saved h;
// last the cast back to the input's dtype.
int64_t LayerAllocations::NormBackward(std::vector<int64_t>* saved, int64_t gout,
                                       const std::function<void()>& weight_gradient,
                                       const NormSizes& n) {
  const int64_t H32 = n.x32, pt = n.rows32;
  const int64_t g_cast = log_->A(n.x);
  if (!run_.adapter.enabled()) {
    const int64_t product = log_->A(n.x);
    weight_gradient();
    log_->T(n.staging);
    log_->F(product);
  }
  log_->F(gout);
  if (!run_.adapter.enabled()) log_->Drop(saved, kNormCast);
  int64_t g32 = g_cast;  // in fp32 the cast is the tensor itself
  if (z_.upcast) {
    g32 = log_->A(H32);
    log_->F(g_cast);
  }
  const int64_t g_r = log_->A(H32), g_h = log_->A(H32);
  const int64_t g_rstd = log_->A(pt);
  log_->F(g_r), log_->F(g32);
  const int64_t t1 = log_->A(pt), t2 = log_->A(pt), g_var = log_->A(pt);
  log_->F(t2), log_->F(t1), log_->F(g_rstd);
  log_->Drop(saved, kNormRstd);
  const int64_t mean = log_->A(H32);
  log_->F(g_var);
  const int64_t pow1 = log_->A(H32), twice = log_->A(H32), product = log_->A(H32);
  log_->F(twice), log_->F(pow1), log_->F(mean);
  log_->Drop(saved, kNormH32);
  log_->F(product);
  if (!z_.upcast) return g_h;
  const int64_t g_in = log_->A(n.x);
  log_->F(g_h);
  return g_in;
}

// x * cos + rotate_half(x) * sin backward (the recorded traces' order): the gradient times cos and
// times sin, the incoming one freed; rotate_half's backward (its concatenation's and negation's
// pieces) is added into the cos product, which is returned.
int64_t LayerAllocations::RotaryBackward(int64_t g, int64_t bytes) {
  const int64_t by_cos = log_->A(bytes), by_sin = log_->A(bytes);
  log_->F(g);
  log_->T(bytes);
  const int64_t half = log_->A(AllocatedBytes(run_.device, bytes / 2));
  log_->F(by_sin);
  const int64_t unrotated = log_->A(bytes);
  log_->F(half), log_->F(unrotated);
  return by_cos;
}

int64_t LayerAllocations::Forward(int64_t x, LayerSaved* layer, bool input_requires_grad) {
  const int64_t H = z_.hidden, KV = z_.kv;
  std::vector<int64_t>* saved = &layer->norm1;
  // Without a gradient into x (an adapter's first layer over the frozen embedding) norm 1 runs
  // without autograd: only transients, nothing saved.
  const int64_t n1 = input_requires_grad ? Norm(saved) : NormNoGrad();
  saved->push_back(n1);  // norm 1's output, saved by the projections
  saved = &layer->attention;
  std::array<int64_t, kNumProjections>& h = layer->adapter_h;
  int64_t q = projections_.Forward(kQ, &h[kQ]);
  log_->BlasWorkspace(kForwardThread);  // fetched by the first matmul, after its output
  int64_t k = projections_.Forward(kK, &h[kK]);
  const int64_t v = projections_.Forward(kV, &h[kV]);
  if (run_.model.qk_norm) {
    // qwen3: each head of q, then of k, normalised (the projection's output goes after).
    const int64_t qn = Norm(&layer->q_norm, q_norm_);
    log_->F(q), q = qn;
    const int64_t kn = Norm(&layer->k_norm, k_norm_);
    log_->F(k), k = kn;
  }
  const int64_t qr = Rotary(q, z_.q), kr = Rotary(k, KV);
  if (run_.eager_attention) {
    // k and v repeated to every head, matmul's contiguous copy of q (saved at the kEager*
    // places); scores = matmul(q, k^T) * scaling, then scores + mask, each freeing the one
    // before; softmax's fp32 copy and its fp32 output, the cast; the output and its contiguous
    // copy; the masked scores go at the return, the rotated q and k and v (the attention's
    // locals) once o_proj's output is made.
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
    log_->F(o), log_->F(masked);
  } else {
    // The fused kernel's output and log-sum-exp; q, k and v stay saved (listed in the order its
    // backward frees them).
    const int64_t o = log_->A(z_.q), lse = log_->A(z_.lse);
    saved->insert(saved->end(), {kr, qr, v, lse, o});
  }
  const int64_t attn = projections_.Forward(kO, &h[kO]);
  if (run_.eager_attention) log_->F(v), log_->F(kr), log_->F(qr);
  const int64_t residual = log_->A(H);  // x + attn
  log_->F(attn);
  const int64_t n2 = Norm(&layer->norm2);
  layer->mlp.push_back(n2);  // norm 2's output
  // SwiGLU, silu(gate_proj(x)) * up_proj(x) with the right operand first: up, gate, silu(gate),
  // the product (the kMlp* places); then down_proj and the residual.
  layer->mlp.push_back(projections_.Forward(kUp, &h[kUp]));
  layer->mlp.push_back(projections_.Forward(kGate, &h[kGate]));
  for (int i = 0; i < 2; ++i) layer->mlp.push_back(log_->A(z_.inter));
  const int64_t down = projections_.Forward(kDown, &h[kDown]);
  const int64_t out = log_->A(H);
  log_->F(down);
  log_->F(residual);
  log_->F(x);  // the caller's variable, reassigned to the output
  int64_t listed = 0;
  for (const auto* part : {&layer->norm1, &layer->q_norm, &layer->k_norm, &layer->attention,
                           &layer->norm2, &layer->mlp, &layer->extra}) {
    for (int64_t id : *part) listed += log_->BytesOf(id);
  }
  for (int64_t id : h) listed += log_->BytesOf(id);
  // Norm 1's autograd would have saved h (fp32) and rstd.
  const int64_t not_saved =
      input_requires_grad ? 0 : (z_.upcast ? hidden_norm_.x32 : 0) + hidden_norm_.rows32;
  TopUp(listed, kept_ - not_saved, &layer->extra);
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
  int64_t q0 = projections_.Forward(kQ, nullptr);
  log_->BlasWorkspace(kForwardThread);
  int64_t k0 = projections_.Forward(kK, nullptr);
  const int64_t v = projections_.Forward(kV, nullptr);
  if (run_.model.qk_norm) {
    const int64_t qn = NormNoGrad(q_norm_);
    log_->F(q0), q0 = qn;
    const int64_t kn = NormNoGrad(k_norm_);
    log_->F(k0), k0 = kn;
  }
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
  const int64_t attn = projections_.Forward(kO, nullptr);
  log_->F(o), log_->F(v), log_->F(k), log_->F(q);
  const int64_t h = log_->A(H);
  log_->F(attn), log_->F(n1);
  const int64_t n2 = NormNoGrad();
  const int64_t g = projections_.Forward(kGate, nullptr), u = projections_.Forward(kUp, nullptr),
                s = log_->A(z_.inter), pr = log_->A(z_.inter);
  const int64_t d = projections_.Forward(kDown, nullptr);
  log_->F(pr), log_->F(s), log_->F(u), log_->F(g);
  const int64_t out = log_->A(H);
  log_->F(d), log_->F(n2), log_->F(h);
  (void)x;  // kept: the checkpoint's saved input
  return out;
}

// RMSNorm without autograd (qwen2_layers.cc RMSNormImpl::forward), as the recorded Qwen3 trace
// orders it (its q/k norms' per-row tensors are large-pool blocks at 16k tokens): h = x in fp32;
// its pow(2), freed once the mean (the variance, a local) is made; variance + eps and its rsqrt,
// h * rsqrt replacing h, the two going as the statement ends; then the cast to the dtype and the
// weight's product, the cast going as the product is made, the variance and the fp32 h as the
// call returns.
int64_t LayerAllocations::NormNoGrad(const NormSizes& n) {
  const int64_t h = log_->A(z_.upcast ? n.x32 : 0);
  const int64_t variance = Variance(n);
  const int64_t shifted = log_->A(n.rows32), rstd = log_->A(n.rows32);
  const int64_t scaled = log_->A(z_.upcast ? n.x32 : 0);
  log_->F(h);
  log_->F(shifted), log_->F(rstd);
  const int64_t cast = log_->A(n.x), out = log_->A(n.x);
  log_->F(cast), log_->F(variance), log_->F(scaled);
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

int64_t LayerAllocations::Backward(int64_t gout, LayerSaved* saved, const LayerGradients& gradients,
                                   bool gout_held, bool input_requires_grad) {
  const int64_t H = z_.hidden;
  std::vector<int64_t>& mlp = saved->mlp;
  // Each node frees what it saved once it has run; an adapter's node its A output last.
  // down_proj: its input's gradient; the product freed.
  const int64_t gd = ProjectionBackward(kDown, true, -1, -1, gradients, [&]() {
    log_->Drop(&mlp, kMlpProduct);
    log_->F(saved->adapter_h[kDown]);
  });
  // silu(gate) * up: the gradients of up and of silu(gate); then silu's, gate's gradient.
  const int64_t gu = log_->A(z_.inter), gs = log_->A(z_.inter);
  log_->F(gd);
  log_->Drop(&mlp, kMlpUp), log_->Drop(&mlp, kMlpSilu);
  const int64_t gg = log_->A(z_.inter);
  log_->F(gs);
  log_->Drop(&mlp, kMlpGate);
  // gate_proj (the later node), then up_proj, which frees norm 2's output; autograd sums their
  // input gradients out of place (in place under sums_in_place_).
  const int64_t g_gate = ProjectionBackward(kGate, true, gg, -1, gradients,
                                            [&]() { log_->F(saved->adapter_h[kGate]); });
  const int64_t g_up =
      ProjectionBackward(kUp, true, gu, sums_in_place_ ? g_gate : -1, gradients, [&]() {
        log_->Drop(&mlp, kMlpInput);
        log_->F(saved->adapter_h[kUp]);
      });
  int64_t g_mlp = g_up;
  if (!sums_in_place_) {
    g_mlp = log_->A(H);
    log_->F(g_gate), log_->F(g_up);
  }
  log_->FreeAll(&mlp);
  const int64_t g_n2 =
      NormBackward(&saved->norm2, g_mlp, [&]() { gradients("post_attention_layernorm"); });
  log_->FreeAll(&saved->norm2);
  // h's gradient: gout plus norm 2's, added into gout in place unless gout is still held (a
  // checkpointed layer's backward keeps its incoming gradient to the end): then a new sum.
  int64_t gh = gout;
  if (gout_held) gh = log_->A(H);
  log_->F(g_n2);
  const int64_t go =
      ProjectionBackward(kO, true, -1, -1, gradients, [&]() { log_->F(saved->adapter_h[kO]); });
  // Without a gradient into x, h's goes with o_proj's node.
  if (!input_requires_grad) log_->F(gh), gh = -1;
  const auto [gq, gk, gv] = AttentionBackward(go, &saved->attention);
  // The rotary embeddings, k's (the later forward op) first; then qwen3's k and q norms.
  int64_t gk_pre = RotaryBackward(gk, z_.kv), gq_pre = RotaryBackward(gq, z_.q);
  if (run_.model.qk_norm) {
    gk_pre = NormBackward(
        &saved->k_norm, gk_pre, [&]() { gradients("self_attn.k_norm"); }, k_norm_);
    gq_pre = NormBackward(
        &saved->q_norm, gq_pre, [&]() { gradients("self_attn.q_norm"); }, q_norm_);
    log_->FreeAll(&saved->k_norm), log_->FreeAll(&saved->q_norm);
  }
  // v_proj, k_proj, q_proj (eager attention's gradients first made contiguous in the
  // projections' layout), each freeing the gradient it consumed. k's input gradient is summed with
  // v's out of place, q's added in place (both in place under sums_in_place_); q_proj frees norm
  // 1's output.
  const int64_t g_v = QkvBackward(kV, gv, input_requires_grad, -1, saved, gradients);
  int64_t g_qkv = -1;
  if (sums_in_place_) {
    g_qkv = QkvBackward(kK, gk_pre, input_requires_grad, g_v, saved, gradients);
    QkvBackward(kQ, gq_pre, input_requires_grad, g_qkv, saved, gradients);
  } else {
    const int64_t g_k = QkvBackward(kK, gk_pre, input_requires_grad, -1, saved, gradients);
    g_qkv = input_requires_grad ? log_->A(H) : -1;
    log_->F(g_v), log_->F(g_k);
    log_->F(QkvBackward(kQ, gq_pre, input_requires_grad, -1, saved, gradients));
  }
  // input_layernorm (and any tensor not named above); its input's gradient is added into h's in
  // place, which is the layer input's.
  if (input_requires_grad) {
    log_->F(NormBackward(&saved->norm1, g_qkv, [&]() { gradients(""); }));
  } else {
    gradients("");
  }
  log_->FreeAll(&saved->norm1);
  log_->FreeAll(&saved->extra);
  return gh;
}

int64_t LayerAllocations::ProjectionBackward(AdapterProjection projection, bool input_grad,
                                             int64_t gout, int64_t into,
                                             const LayerGradients& gradients,
                                             absl::FunctionRef<void()> saved_released) {
  // Frozen under an adapter, which makes its own A and B gradients inside its node.
  const bool base_trains = !run_.adapter.enabled();
  const bool bias = has_bias_[projection];
  const std::string path = kProjectionPaths[projection];
  // A bias-free linear (matmul) makes its weight's gradient first; with a bias (addmm) its
  // input's comes first, then the weight's and the bias's, summed over the tokens through a
  // staging buffer.
  if (base_trains && !bias) gradients(path);
  // A trained base's node saved its input for its weight's gradient: released after it.
  const auto nothing = [] {};
  const int64_t in = projections_.Backward(
      projection, input_grad, base_trains ? -1 : gout, into,
      [&](const char* which) { gradients(path + "." + which); },
      base_trains ? absl::FunctionRef<void()>(nothing) : saved_released);
  if (base_trains && bias) {
    gradients(path);
    log_->T(bias_staging_[projection]);
  }
  if (base_trains) log_->F(gout), saved_released();
  return in;
}

int64_t LayerAllocations::QkvBackward(AdapterProjection projection, int64_t g, bool input_grad,
                                      int64_t into, LayerSaved* saved,
                                      const LayerGradients& gradients) {
  int64_t consumed = g;
  if (run_.eager_attention) {
    consumed = log_->A(projection == kQ ? z_.q : z_.kv);
    log_->F(g);
  }
  return ProjectionBackward(projection, input_grad, consumed, into, gradients, [&]() {
    if (projection == kQ) log_->Drop(&saved->norm1, static_cast<int>(saved->norm1.size()) - 1);
    log_->F(saved->adapter_h[projection]);
  });
}

LayerAllocations::QueryKeyValue LayerAllocations::AttentionBackward(int64_t go,
                                                                    std::vector<int64_t>* att) {
  if (!run_.eager_attention) {
    // The fused kernel (cuDNN on the lab's devices, native GQA): the gradients of q and of the
    // un-repeated k and v, and its workspace; then o_proj's gradient and the saved tensors go.
    const int64_t gq = log_->A(z_.q), gk = log_->A(z_.kv), gv = log_->A(z_.kv);
    log_->T(sdpa_workspace_);
    log_->F(go);
    log_->FreeAll(att);
    return {gq, gk, gv};
  }
  // The output's contiguous copy goes with o_proj; its gradient is made [b, h, s, d] again.
  log_->Drop(att, kEagerOutput);
  const int64_t g_out = log_->A(z_.q);
  log_->F(go);
  // matmul(probs, values): the gradients of the values and of the probabilities (bf16).
  const int64_t gv_heads = log_->A(z_.q), gp = log_->A(z_.scores);
  log_->F(g_out);
  log_->Drop(att, kEagerValues), log_->Drop(att, kEagerProbs);
  // The cast's fp32 gradient; softmax_backward's fp32 result and its fp32 workspace; the cast
  // back to the dtype; the gradient through `* scaling`.
  const int64_t gp32 = log_->A(z_.upcast ? z_.scores32 : 0);
  log_->F(gp);
  const int64_t gs32 = log_->A(z_.scores32);
  log_->T(z_.scores32);
  log_->F(gp32);
  log_->Drop(att, kEagerProbs32);
  const int64_t gs = log_->A(z_.upcast ? z_.scores : 0);
  log_->F(gs32);
  const int64_t gm = log_->A(z_.scores);
  log_->F(gs);
  // matmul(q, keys^T): the keys' gradient, then q's; then repeat_kv's backward sums each to the
  // kv heads.
  const int64_t gk_heads = log_->A(z_.q), gq = log_->A(z_.q);
  log_->F(gm);
  log_->Drop(att, kEagerKeys), log_->Drop(att, kEagerQuery);
  const int64_t gv = log_->A(z_.kv);
  log_->F(gv_heads);
  const int64_t gk = log_->A(z_.kv);
  log_->F(gk_heads);
  log_->FreeAll(att);
  return {gq, gk, gv};
}

}  // namespace vramlab::server::estimate
