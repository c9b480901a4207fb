#include "server/estimate/step_allocations.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/spec/model_family.h"
#include "server/estimate/activation_model.h"
#include "server/estimate/device_model.h"
#include "server/estimate/model_shape.h"
#include "server/estimate/step_timeline.h"

namespace vramlab::server::estimate {
namespace {

using vramlab::v1::Phase;

constexpr int64_t kFp32 = 4;

// Tensor sizes of one micro-batch, as activation_model.cc names them.
struct Sizes {
  explicit Sizes(const RunSettings& r) {
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
    head = alloc(m.vocab_size * m.hidden_size * e);
  }
  bool upcast;
  int64_t hidden, hidden32, per_token32, q, kv, inter, scores, scores32, lse, logits, logits32,
      head, chunks;
};

// How a micro-step's gradients behave (as step_timeline.cc's walk).
enum class Gradients { kCreated, kAccumulated, kFreedAtOnce };

class Planner {
 public:
  Planner(const RunSettings& run, const ParameterState& params)
      : run_(run),
        p_(params),
        z_(run),
        layer_(EstimateLayerActivations(run)),
        loss_(EstimateLossActivations(run)),
        inputs_(EstimateStepInputs(run)) {
    const std::vector<spec_rules::ParameterTensorInfo> layer =
        spec_rules::DecoderLayerTensors(run.model.Decoder());
    int64_t total = 0;
    for (const auto& t : layer) total += t.elements();
    // Each layer tensor's share of the layer's gradients and state (exact for full
    // fine-tuning, where every tensor's gradient is its own dtype copy).
    for (const auto& t : layer) {
      LayerTensor lt;
      lt.name = t.name;
      lt.gradient = total > 0 ? Share(p_.layer_gradients, t.elements(), total) : 0;
      lt.state = total > 0 ? Share(p_.layer_state, t.elements(), total) : 0;
      lt.elements = t.elements();
      layer_tensors_.push_back(lt);
    }
    state_tensors_ = StateTensorsPerParameter(run.optimizer);
  }

  std::vector<AllocationEvent> Plan(int32_t steps, int32_t micro_steps) {
    phase_ = vramlab::v1::LOAD;
    AllocateWeights();
    for (int32_t step = 0; step < steps; ++step) {
      step_ = step;
      for (int32_t micro = 0; micro < micro_steps; ++micro) {
        micro_ = micro;
        const Gradients kind = run_.in_backward ? Gradients::kFreedAtOnce
                               : micro == 0     ? Gradients::kCreated
                                                : Gradients::kAccumulated;
        MicroStep(kind);
      }
      if (!run_.in_backward) OptimizerStep();
    }
    return std::move(events_);
  }

 private:
  // A decoder layer's saved tensors, by the part of its backward that frees them. Eager
  // attention's are at the kEager* places of `attention`, SwiGLU's at the kMlp* places of `mlp`
  // (-1: freed, or none).
  struct LayerSaved {
    std::vector<int64_t> norm1, attention, norm2, mlp, extra;
  };
  enum { kEagerKeys, kEagerValues, kEagerQuery, kEagerProbs32, kEagerProbs, kEagerOutput };
  enum { kMlpInput, kMlpUp, kMlpGate, kMlpSilu, kMlpProduct };
  struct LayerTensor {
    std::string name;
    int64_t elements = 0, gradient = 0, state = 0;
  };

  static int64_t Share(int64_t total, int64_t part, int64_t whole) {
    return static_cast<int64_t>(static_cast<double>(total) * static_cast<double>(part) /
                                static_cast<double>(whole));
  }
  static int StateTensorsPerParameter(vramlab::v1::OptimizerKind kind) {
    switch (kind) {
      case vramlab::v1::ADAMW_FP32_MASTER:
        return 3;
      case vramlab::v1::SGD:
        return 1;
      default:
        return 2;
    }
  }

  int64_t A(int64_t bytes) {
    const int64_t id = next_id_++;
    if (bytes <= 0) return -1;
    events_.push_back({AllocationEvent::kAlloc, id, bytes, phase_, step_, micro_});
    return id;
  }
  void F(int64_t id) {
    if (id < 0) return;
    events_.push_back({AllocationEvent::kFree, id, 0, phase_, step_, micro_});
  }
  void FreeAll(std::vector<int64_t>* ids) {
    for (int64_t id : *ids) F(id);
    ids->clear();
  }
  // The saved tensor at `place` of `part`, freed by the node that saved it.
  void Drop(std::vector<int64_t>* part, int place) { F((*part)[place]), (*part)[place] = -1; }
  // A transient of `bytes`: allocated and freed at once.
  void T(int64_t bytes) { F(A(bytes)); }

  // The cuBLAS workspace of a thread's first matmul, kept (device_model.h): the training
  // thread's in the first forward, autograd's device thread's in the first backward. Up to
  // kCudaBlasWorkspaceThreads of them.
  enum BlasThread { kForwardThread, kBackwardThread };
  void BlasWorkspace(BlasThread thread) {
    if (run_.device != Device::kCuda || thread >= kCudaBlasWorkspaceThreads ||
        workspaces_[thread]) {
      return;
    }
    A(kCudaBlasWorkspaceBytes);
    workspaces_[thread] = true;
  }

  void AllocateWeights() {
    // Every parameter tensor in named_parameters() order, the weights' bytes shared by elements
    // (exact for dense weights; QLoRA's codes and constants, adapters, in proportion).
    const std::vector<int64_t> tensors = ParameterTensorElements(run_.model);
    int64_t total = 0;
    for (int64_t n : tensors) total += n;
    for (int64_t n : tensors) weights_.push_back(A(Share(p_.weights, n, total)));
  }

  // One gradient made by backward: kept (first micro-batch; `order` is its parameter's place in
  // named_parameters(), the order zero_grad frees them in), added into the held one and freed
  // (accumulation), or consumed by its update and freed (in_backward; the first step creates the
  // parameter's state first).
  void Gradient(int64_t bytes, int64_t state_bytes, Gradients kind, int64_t order) {
    if (bytes <= 0) return;
    KeepGradient(A(bytes), bytes, state_bytes, kind, order);
  }
  void KeepGradient(int64_t id, int64_t bytes, int64_t state_bytes, Gradients kind, int64_t order) {
    if (kind == Gradients::kCreated) return gradients_.push_back({order, id});
    if (kind == Gradients::kFreedAtOnce) {
      if (step_ == 0) CreateState(state_bytes);
      T(std::min(p_.in_backward_update_temporaries, 2 * bytes));
    }
    F(id);
  }
  void CreateState(int64_t bytes) {
    for (int i = 0; i < state_tensors_; ++i) state_.push_back(A(bytes / state_tensors_));
  }
  // The gradients of layer `layer`'s tensors whose names start with `prefix` not made yet, in
  // named_parameters() order (a weight's, then its bias's).
  void LayerGradients(int64_t layer, const std::string& prefix, Gradients kind) {
    const auto n = static_cast<int64_t>(layer_tensors_.size());
    for (int64_t j = 0; j < n; ++j) {
      const LayerTensor& t = layer_tensors_[j];
      if (made_[j] || t.name.compare(0, prefix.size(), prefix) != 0) continue;
      made_[j] = true;
      Gradient(t.gradient, t.state, kind, 1 + layer * n + j);
    }
  }

  // A norm's saved tensors (activation_model.cc NormSaved), after its fp32 product; the first is
  // h = x.to(fp32). h.pow(2) lives until its mean is taken.
  void Norm(std::vector<int64_t>* saved) {
    saved->push_back(A(z_.upcast ? z_.hidden32 : 0));
    T(z_.hidden32);
    saved->push_back(A(z_.per_token32));
    const int64_t product = A(z_.upcast ? z_.hidden32 : 0);
    const int64_t normalized = A(z_.hidden);
    F(product);
    if (run_.adapter.enabled()) {
      T(z_.hidden);  // the frozen weight's product only
      F(normalized);
    } else {
      saved->push_back(normalized);
    }
  }
  // RMSNorm's backward, to the fp32 gradient of h (returned; the caller frees it after the cast
  // to the input's dtype): the cast's fp32 gradient; h * r's two (r's reduced to r's shape and
  // freed); mean's expanded gradient; pow's h.pow(1), 2 * that and the product, which is added
  // into h's gradient in place. Pow's node frees the saved h (the first of `saved`).
  int64_t NormBackward(std::vector<int64_t>* saved) {
    const int64_t H32 = z_.hidden32;
    const int64_t cast = A(H32), r = A(H32), h = A(H32);
    F(r), F(cast);
    const int64_t mean = A(H32), pow1 = A(H32), twice = A(H32), product = A(H32);
    F(twice), F(pow1), F(mean);
    Drop(saved, 0);
    F(product);
    return h;
  }

  // One decoder layer's forward with autograd; `x` (its input) is freed and the output returned;
  // the saved tensors are put in `layer`, by the part of backward that frees them.
  int64_t LayerForward(int64_t x, LayerSaved* layer) {
    const int64_t H = z_.hidden, KV = z_.kv;
    std::vector<int64_t>* saved = &layer->norm1;
    Norm(saved);
    saved->push_back(A(H));  // norm 1's output, saved by the projections
    saved = &layer->attention;
    const int64_t q = A(z_.q);
    BlasWorkspace(kForwardThread);  // fetched by the first matmul, after its output
    const int64_t k = A(KV), v = A(KV);
    // Rotary: x*cos, rotate_half(x), its product with sin, then the sum.
    int64_t t1 = A(z_.q), t2 = A(z_.q), t3 = A(z_.q);
    const int64_t qr = A(z_.q);
    F(t1), F(t2), F(t3);
    t1 = A(KV), t2 = A(KV), t3 = A(KV);
    const int64_t kr = A(KV);
    F(t1), F(t2), F(t3), F(q), F(k);
    if (run_.eager_attention) {
      // k and v repeated to every head, matmul's contiguous copy of q (saved at the kEager*
      // places); scores = matmul(q, k^T) * scaling, then scores + mask, each freeing the one
      // before; softmax's fp32 copy and its fp32 output, the cast; the output and its contiguous
      // copy; the masked scores go at the return.
      for (int i = 0; i < 3; ++i) saved->push_back(A(z_.q));
      const int64_t product = A(z_.scores), scaled = A(z_.scores);
      F(product);
      const int64_t masked = A(z_.scores);
      F(scaled);
      const int64_t copy = A(z_.upcast ? z_.scores32 : 0);
      saved->push_back(A(z_.scores32));
      F(copy);
      saved->push_back(A(z_.upcast ? z_.scores : 0));
      const int64_t o = A(z_.q);
      saved->push_back(A(z_.q));
      F(o), F(masked), F(qr), F(kr), F(v);
    } else {
      // The fused kernel's output and log-sum-exp; q, k and v stay saved.
      saved->push_back(qr);
      saved->push_back(kr);
      saved->push_back(v);
      saved->push_back(A(z_.q));
      saved->push_back(A(z_.lse));
    }
    const int64_t attn = A(H);
    const int64_t h = A(H);  // x + attn
    F(attn);
    F(x);
    Norm(&layer->norm2);
    layer->mlp.push_back(A(H));  // norm 2's output
    // SwiGLU, silu(gate_proj(x)) * up_proj(x) with the right operand first: up, gate, silu(gate),
    // the product (the kMlp* places); then down_proj and the residual.
    for (int i = 0; i < 4; ++i) layer->mlp.push_back(A(z_.inter));
    if (run_.eager_attention) {
      // Two fp32 hidden-sized tensors per layer the op walk does not explain (measured:
      // activation_model.cc kUnexplainedFp32HiddenPerLayer).
      layer->extra.push_back(A(z_.hidden32));
      layer->extra.push_back(A(z_.hidden32));
    }
    const int64_t down = A(H);
    const int64_t out = A(H);
    F(down);
    F(h);
    int64_t listed = 0;
    for (const auto* part :
         {&layer->norm1, &layer->attention, &layer->norm2, &layer->mlp, &layer->extra}) {
      for (int64_t id : *part) listed += BytesOf(id);
    }
    TopUp(listed, layer_.kept, &layer->extra);
    return out;
  }

  // Modes whose tensors are not listed one by one here (fused kernels, adapters, qk-norms): the
  // `listed` saved bytes are topped up to the walk's `kept` with one block.
  void TopUp(int64_t listed, int64_t kept, std::vector<int64_t>* saved) {
    if (kept > listed) saved->push_back(A(kept - listed));
  }
  int64_t BytesOf(int64_t id) const {
    // Ids are allocated in order and every kAlloc event carries its id; search from the back.
    for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
      if (it->kind == AllocationEvent::kAlloc && it->id == id) return it->bytes;
    }
    return 0;
  }

  // Forward without autograd (a checkpointed layer): only transients; the input is kept.
  int64_t LayerForwardNoGrad(int64_t x) {
    const int64_t H = z_.hidden;
    std::vector<int64_t> transient;
    Norm(&transient);
    const int64_t n1 = A(H);
    FreeAll(&transient);
    const int64_t q = A(z_.q);
    BlasWorkspace(kForwardThread);
    const int64_t k = A(z_.kv), v = A(z_.kv);
    F(n1);
    if (run_.eager_attention) {
      // As with autograd (LayerForward), nothing saved: the fp32 output goes after its cast, the
      // masked scores and probabilities at the return.
      const int64_t kr = A(z_.q), vr = A(z_.q);
      const int64_t product = A(z_.scores), scaled = A(z_.scores);
      F(product);
      const int64_t s = A(z_.scores);
      F(scaled);
      const int64_t s32 = A(z_.upcast ? z_.scores32 : 0);
      const int64_t p32 = A(z_.scores32);
      F(s32);
      const int64_t p = A(z_.upcast ? z_.scores : 0);
      F(p32);
      const int64_t o = A(z_.q);
      F(p), F(s), F(kr), F(vr);
      F(q), F(k), F(v);
      F(o);
    } else {
      const int64_t o = A(z_.q);
      T(z_.lse);
      F(q), F(k), F(v);
      F(o);
    }
    const int64_t h = A(H);
    Norm(&transient);
    const int64_t n2 = A(H);
    FreeAll(&transient);
    const int64_t g = A(z_.inter), s = A(z_.inter), u = A(z_.inter), pr = A(z_.inter);
    F(g), F(s), F(u);
    const int64_t d = A(H);
    F(pr), F(n2);
    const int64_t out = A(H);
    F(d), F(h);
    (void)x;  // kept: the checkpoint's saved input
    return out;
  }

  // One decoder layer's backward: `gout` is the gradient of its output (freed); returns the
  // gradient of its input. Frees `saved`.
  int64_t LayerBackward(int64_t layer, int64_t gout, LayerSaved* saved, Gradients kind) {
    const int64_t H = z_.hidden;
    std::vector<int64_t>& mlp = saved->mlp;
    made_.assign(layer_tensors_.size(), false);
    // Each linear's weight gradient comes before its input's; each node frees what it saved once
    // it has run. down_proj: its input's gradient; the product freed.
    LayerGradients(layer, "mlp.down_proj", kind);
    const int64_t gd = A(z_.inter);
    Drop(&mlp, kMlpProduct);
    // silu(gate) * up: the gradients of up and of silu(gate); then silu's, gate's gradient.
    const int64_t gu = A(z_.inter), gs = A(z_.inter);
    F(gd);
    Drop(&mlp, kMlpUp), Drop(&mlp, kMlpSilu);
    const int64_t gg = A(z_.inter);
    F(gs);
    Drop(&mlp, kMlpGate);
    // gate_proj (the later node), then up_proj; their input gradients summed.
    LayerGradients(layer, "mlp.gate_proj", kind);
    const int64_t gmlp = A(H);
    F(gg);
    LayerGradients(layer, "mlp.up_proj", kind);
    F(gu);
    FreeAll(&mlp);
    LayerGradients(layer, "post_attention_layernorm", kind);
    const int64_t h32 = NormBackward(&saved->norm2);
    const int64_t gh = A(H);
    F(h32);
    F(gmlp);
    FreeAll(&saved->norm2);
    LayerGradients(layer, "self_attn.o_proj", kind);
    const int64_t go = A(z_.q);
    int64_t gq = -1, gk = -1, gv = -1, gkr = -1, gvr = -1;
    if (run_.eager_attention) {
      std::vector<int64_t>* att = &saved->attention;
      Drop(att, kEagerOutput);
      // matmul(probs, values): the gradients of the values and of the probabilities (bf16).
      gv = A(z_.q);
      const int64_t gp = A(z_.scores);
      Drop(att, kEagerValues), Drop(att, kEagerProbs);
      // The cast's fp32 gradient; softmax_backward's fp32 result (its fp32 workspace, in the
      // recorded traces, is not listed: the step walk does not count it); the cast back to the
      // dtype; the gradient through `* scaling`.
      const int64_t gp32 = A(z_.upcast ? z_.scores32 : 0);
      F(gp);
      const int64_t gs32 = A(z_.scores32);
      F(gp32);
      Drop(att, kEagerProbs32);
      const int64_t gs = A(z_.upcast ? z_.scores : 0);
      F(gs32);
      const int64_t gm = A(z_.scores);
      F(gs);
      gq = A(z_.q), gk = A(z_.q);
      F(gm), F(go);
      FreeAll(att);
    } else {
      gq = A(z_.q), gk = A(z_.q), gv = A(z_.q);
      T(z_.hidden32);  // the fp32 dq accumulator
      gkr = A(z_.kv), gvr = A(z_.kv);
      F(gk), F(gv), F(go);
      gk = gv = -1;
      FreeAll(&saved->attention);
    }
    // repeat_kv's backward and rotary's temporaries; then v_proj, k_proj, q_proj.
    T(z_.q), T(z_.q);
    const int64_t gx = A(H);
    for (const char* part : {"self_attn.v_proj", "self_attn.k_", "self_attn.q_"}) {
      LayerGradients(layer, part, kind);
    }
    F(gq), F(gk), F(gv), F(gkr), F(gvr);
    LayerGradients(layer, "", kind);  // input_layernorm (and any tensor not named above)
    F(NormBackward(&saved->norm1));
    FreeAll(&saved->norm1);
    FreeAll(&saved->extra);
    F(gh);
    F(gout);
    return gx;
  }

  void MicroStep(Gradients kind) {
    const int64_t layers = run_.model.num_layers;
    phase_ = vramlab::v1::FORWARD;
    const int64_t ids = A(inputs_.token_ids);
    const int64_t inputs = A(inputs_.in_forward);
    int64_t x = A(z_.hidden);  // the embedding's output
    std::vector<LayerSaved> saved(static_cast<size_t>(layers));
    std::vector<int64_t> inputs_kept(static_cast<size_t>(layers), -1);
    for (int64_t i = 0; i < layers; ++i) {
      if (IsCheckpointed(run_, i)) {
        inputs_kept[i] = x;
        x = LayerForwardNoGrad(x);
      } else {
        x = LayerForward(x, &saved[i]);
      }
    }
    // Loss forward: the final norm, then the logits.
    std::vector<int64_t> loss_saved;
    Norm(&loss_saved);
    const int64_t head_input = A(z_.hidden);  // lm_head's input
    F(x);
    int64_t log_probs = -1;
    if (run_.chunked_loss) {
      for (int64_t c = 0; c < z_.chunks; ++c) {
        const int64_t l = A(z_.logits), l32 = A(z_.upcast ? z_.logits32 : 0);
        F(l32), F(l);
      }
    } else {
      const int64_t l = A(z_.logits);
      const int64_t up = A(z_.upcast ? z_.logits32 : 0);
      log_probs = A(z_.logits32);
      F(up), F(l);
    }
    int64_t listed = BytesOf(head_input) + (log_probs >= 0 ? BytesOf(log_probs) : 0);
    for (int64_t id : loss_saved) listed += BytesOf(id);
    TopUp(listed, loss_.kept, &loss_saved);

    phase_ = vramlab::v1::BACKWARD;
    const bool tied = run_.model.tie_word_embeddings;
    const auto last_parameter = static_cast<int64_t>(ParameterTensorElements(run_.model).size());
    int64_t waiting_head = -1;  // a tied embedding's lm_head gradient, until the embedding's
    auto head_gradient = [&]() {
      if (p_.head_gradient <= 0) return;
      if (tied) {
        waiting_head = A(p_.head_gradient);
      } else {
        Gradient(p_.head_gradient, p_.head_state, kind, last_parameter);
      }
    };
    int64_t gy = -1;
    if (run_.chunked_loss) {
      gy = A(z_.hidden);
      head_gradient();
      for (int64_t c = 0; c < z_.chunks; ++c) {
        const int64_t l = A(z_.logits);
        BlasWorkspace(kBackwardThread);  // the chunk's logits, recomputed: backward's first matmul
        const int64_t l32 = A(z_.upcast ? z_.logits32 : 0);
        T(z_.logits);
        F(l32), F(l);
      }
    } else {
      // nll_loss's and log_softmax's fp32 gradients, the cast, lm_head's gradients.
      const int64_t g1 = A(z_.logits32), g2 = A(z_.logits32);
      F(g1);
      F(log_probs);
      const int64_t gl = A(z_.logits);
      F(g2);
      // Backward's first matmul is lm_head's weight gradient, else its input gradient; the
      // workspace is fetched after the product's output is allocated.
      head_gradient();
      if (p_.head_gradient > 0) BlasWorkspace(kBackwardThread);
      gy = A(z_.hidden);
      BlasWorkspace(kBackwardThread);
      F(gl);
    }
    F(head_input);
    const int64_t h32 = NormBackward(&loss_saved);
    const int64_t g = A(z_.hidden);
    F(h32);
    F(gy);
    FreeAll(&loss_saved);
    gy = g;
    for (int64_t i = layers - 1; i >= 0; --i) {
      if (IsCheckpointed(run_, i)) {
        // Recompute with autograd from the saved input (which the recompute does not free).
        const int64_t out = LayerForward(-1, &saved[i]);
        F(out);
        F(inputs_kept[i]);
      }
      gy = LayerBackward(i, gy, &saved[i], kind);
    }
    // The embedding's backward: a fresh dense vocabulary x hidden gradient, which autograd's
    // input buffer adds to the waiting one out of place; the sum is the gradient.
    if (tied && waiting_head >= 0) {
      const int64_t fresh = A(p_.head_gradient);
      const int64_t sum = A(p_.head_gradient);
      F(waiting_head), F(fresh);
      KeepGradient(sum, p_.head_gradient, p_.head_state, kind, 0);
    }
    // Gradients outside the layers and the vocabulary-sized one: the final norm's and an untied
    // embedding's (the first parameter; else the final norm, after the layers).
    const int64_t rest = p_.all_gradients - run_.model.num_layers * p_.layer_gradients -
                         (p_.head_gradient > 0 ? p_.head_gradient : 0);
    const int64_t rest_state =
        p_.optimizer_state - run_.model.num_layers * p_.layer_state - p_.head_state;
    Gradient(rest, rest_state, kind, tied ? last_parameter - 1 : 0);
    F(gy);
    F(inputs);
    F(ids);
  }

  void OptimizerStep() {
    phase_ = vramlab::v1::OPTIMIZER_STEP;
    // The first step creates the state tensor by tensor as the update reaches it (the
    // vocabulary-sized tensor's is head_state; the others share the rest in proportion), each
    // update's temporaries between (in proportion; the largest takes the walk's step_temporaries).
    const std::vector<int64_t> tensors = ParameterTensorElements(run_.model);
    const auto count = static_cast<int64_t>(tensors.size());
    const int64_t head = run_.model.tie_word_embeddings ? 0 : count - 1;
    const int64_t head_state = p_.head_gradient > 0 ? p_.head_state : 0;
    int64_t rest = 0, largest = 1;
    for (int64_t t = 0; t < count; ++t) {
      largest = std::max(largest, tensors[t]);
      if (t != head || head_state <= 0) rest += tensors[t];
    }
    for (int64_t t = 0; t < count; ++t) {
      if (step_ == 0) {
        CreateState(t == head && head_state > 0
                        ? head_state
                        : Share(p_.optimizer_state - head_state, tensors[t], rest));
      }
      T(Share(p_.step_temporaries, tensors[t], largest));
    }
    // zero_grad(set_to_none) frees the gradients in named_parameters() order.
    phase_ = vramlab::v1::ZERO_GRAD;
    std::stable_sort(gradients_.begin(), gradients_.end());
    for (const auto& g : gradients_) F(g.second);
    gradients_.clear();
  }

  const RunSettings& run_;
  const ParameterState& p_;
  const Sizes z_;
  const LayerActivations layer_;
  const LossActivations loss_;
  const StepInputs inputs_;
  std::vector<LayerTensor> layer_tensors_;
  int state_tensors_ = 2;
  std::vector<AllocationEvent> events_;
  std::vector<int64_t> weights_, state_;
  std::vector<std::pair<int64_t, int64_t>> gradients_;  // (named_parameters() place, id)
  std::vector<bool> made_;  // by layer tensor: its gradient made in this layer's backward
  int64_t next_id_ = 1;
  bool workspaces_[2] = {false, false};  // by BlasThread
  Phase phase_ = vramlab::v1::LOAD;
  int32_t step_ = 0, micro_ = 0;
};

}  // namespace

std::vector<AllocationEvent> PlanStepAllocations(const RunSettings& run,
                                                 const ParameterState& params, int32_t steps,
                                                 int32_t micro_steps) {
  const int32_t s = std::max<int32_t>(1, std::min<int64_t>(steps, run.steps));
  const int32_t m = std::max<int32_t>(1, std::min<int64_t>(micro_steps, run.grad_accum_steps));
  return Planner(run, params).Plan(s, m);
}

}  // namespace vramlab::server::estimate
