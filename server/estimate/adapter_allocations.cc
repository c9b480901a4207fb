#include "server/estimate/adapter_allocations.h"

#include "common/spec/adapter_sizes.h"
#include "server/estimate/device_model.h"

namespace vramlab::server::estimate {

AdapterAllocations::AdapterAllocations(const RunSettings& run, AllocationLog* log)
    : run_(run), log_(log), activations_(EstimateAdapterActivations(run)) {
  for (int p = 0; p < kNumProjections; ++p) {
    sizes_[p] = SizesOf(run, static_cast<AdapterProjection>(p));
  }
}

AdapterAllocations::Sizes AdapterAllocations::SizesOf(const RunSettings& run,
                                                      AdapterProjection projection) {
  const ProjectionFeatures f = FeaturesOf(run, projection);
  const int64_t tokens = run.tokens(), e = run.dtype_bytes, ab = run.adapter.dtype_bytes;
  auto alloc = [&](int64_t nbytes) { return AllocatedBytes(run.device, nbytes); };
  const int64_t n = f.in * f.out;
  const int64_t blocks = spec_rules::CeilDiv(n, spec_rules::kNf4BlockSize);
  return {alloc(tokens * f.in * e),
          alloc(tokens * f.in * ab),
          alloc(tokens * f.out * e),
          alloc(tokens * f.out * ab),
          alloc(tokens * run.adapter.rank * ab),
          alloc(n * e),
          alloc((n + 1) / 2 * 4),
          alloc(blocks * 4),
          e != 4 ? alloc(blocks * e) : 0,
          ab != e,
          f.bias,
          f.wrapped};
}

int64_t AdapterAllocations::Dequantize(const Sizes& z) {
  const int64_t codes = log_->A(z.codes32);
  const int64_t weight = log_->A(z.weight);
  log_->F(codes);
  const int64_t absmax_codes = log_->A(z.absmax32);
  const int64_t decoded = log_->A(z.absmax32);
  log_->F(absmax_codes);
  const int64_t absmax = log_->A(z.absmax32);
  log_->F(decoded);
  const int64_t cast = log_->A(z.absmax_e);  // none where the base dtype is fp32
  log_->F(cast), log_->F(absmax);
  return weight;
}

int64_t AdapterAllocations::BlockAround(int64_t extra, int64_t bytes) {
  const int64_t block = log_->A(extra);
  const int64_t result = log_->A(bytes);
  log_->F(block);
  return result;
}

int64_t AdapterAllocations::Forward(AdapterProjection projection, int64_t* saved_h) {
  const Sizes& z = sizes_[projection];
  if (saved_h != nullptr) *saved_h = -1;
  if (!z.wrapped) return log_->A(z.out_e);
  if (run_.adapter.dropout) {
    // The plain autograd path (LoraLinear::Update): what its call allocates beyond the output
    // (adapter_model.cc), as one block live while the output is made.
    return BlockAround(activations_.projection[projection].forward - z.out_e, z.out_e);
  }
  const int64_t x_cast = z.cast ? z.in_a : 0;
  int64_t out = -1, h = -1;
  if (!run_.adapter.qlora) {
    // LoraLinearFunction: the base output; x cast for A and A's output h (the cast freed after
    // it); the base output widened and addmm's sum; the sum cast back, the output.
    const int64_t base = log_->A(z.out_e);
    log_->BlasWorkspace(kForwardThread);  // the first matmul's, after its output
    h = CastAndProject(x_cast, z);
    const int64_t wide = log_->A(z.cast ? z.out_a : 0);
    const int64_t sum = log_->A(z.out_a);
    log_->F(wide);
    if (z.cast) {
      out = log_->A(z.out_e);
      log_->F(sum), log_->F(base);
    } else {
      out = sum;
      log_->F(base);
    }
  } else {
    // Nf4LoraLinear::Forward: Nf4Matmul (the weight freed after the product), the bias add; then
    // LoraUpdateFunction (x cast for A and A's output h, B's output and its scaled copy), the
    // update cast to the base dtype and the sum.
    const int64_t weight = Dequantize(z);
    int64_t base = log_->A(z.out_e);
    log_->BlasWorkspace(kForwardThread);  // the first matmul's, after its output
    log_->F(weight);
    if (z.bias) {
      const int64_t biased = log_->A(z.out_e);
      log_->F(base);
      base = biased;
    }
    h = CastAndProject(x_cast, z);
    const int64_t b_out = log_->A(z.out_a), scaled = log_->A(z.out_a);
    log_->F(b_out);
    const int64_t update = log_->A(z.cast ? z.out_e : 0);
    out = log_->A(z.out_e);
    log_->F(update), log_->F(scaled), log_->F(base);
  }
  // The adapter's node saves h; without autograd it goes as the call returns.
  if (saved_h != nullptr) {
    *saved_h = h;
  } else {
    log_->F(h);
  }
  return out;
}

int64_t AdapterAllocations::CastAndProject(int64_t x_cast, const Sizes& z) {
  const int64_t cast = log_->A(x_cast);
  const int64_t h = log_->A(z.rank_a);
  log_->F(cast);
  return h;
}

int64_t AdapterAllocations::Backward(AdapterProjection projection, bool input_grad, int64_t gout,
                                     int64_t into, const std::function<void(const char*)>& gradient,
                                     absl::FunctionRef<void()> saved_released) {
  const Sizes& z = sizes_[projection];
  // A gradient `made` by a node, as the engine places it: added into `into` in place.
  auto accumulate = [&](int64_t made) {
    if (into < 0 || made < 0) return made;
    log_->F(made);
    return into;
  };
  if (!z.wrapped) {
    const int64_t in = input_grad ? log_->A(z.in_e) : -1;
    log_->F(gout);
    saved_released();
    return accumulate(in);
  }
  if (run_.adapter.dropout) {
    gradient("lora_B"), gradient("lora_A");
    const int64_t in = BlockAround(activations_.projection[projection].backward - z.in_e, z.in_e);
    log_->F(gout);
    saved_released();
    return accumulate(in);
  }
  const int64_t x_cast = z.cast ? z.in_a : 0;
  // The adapter's gradients, as LoraLinearFunction's and LoraUpdateFunction's backward make them:
  // grad_h = grad·B, B's gradient, x cast again and A's gradient (the cast freed after it).
  auto adapter_gradients = [&]() {
    const int64_t grad_h = log_->A(z.rank_a);
    gradient("lora_B");
    const int64_t cast = log_->A(x_cast);
    gradient("lora_A");
    log_->F(cast);
    return grad_h;
  };
  if (!run_.adapter.qlora) {
    // LoraLinearFunction::backward: the gradient widened (held to the return), the adapter's
    // gradients; with the input's gradient, grad_h·A in the adapter dtype and its cast, grad·W
    // and their sum.
    const int64_t wide = log_->A(z.cast ? z.out_a : 0);
    const int64_t grad_h = adapter_gradients();
    int64_t in = -1;
    if (input_grad) {
      const int64_t update = log_->A(z.in_a);
      const int64_t update_cast = log_->A(z.cast ? z.in_e : 0);
      const int64_t base = log_->A(z.in_e);
      in = log_->A(z.in_e);
      log_->F(base), log_->F(update_cast), log_->F(update);
    }
    log_->F(grad_h), log_->F(wide);
    log_->F(gout);
    saved_released();
    return accumulate(in);
  }
  // The later node first: the widened gradient (ToCopyBackward), then LoraUpdateFunction: its
  // scaled copy, the adapter's gradients, grad_h·A in the adapter dtype and its cast (the
  // update's input gradient), then what it saved goes. Then Nf4MatmulFunction dequantises again
  // and forms grad·W; as the node returns, the engine drops its input (gout) and then adds grad·W
  // into the update in place (the update is its only reference) and frees it. Without the
  // input's gradient the base product has no node.
  const int64_t wide = log_->A(z.cast ? z.out_a : 0);
  const int64_t scaled = log_->A(z.out_a);
  const int64_t grad_h = adapter_gradients();
  int64_t update = -1;
  if (input_grad) {
    const int64_t update32 = log_->A(z.in_a);
    update = update32;
    if (z.cast) {
      update = log_->A(z.in_e);
      log_->F(update32);
    }
  }
  log_->F(grad_h), log_->F(scaled), log_->F(wide);
  saved_released();
  update = accumulate(update);
  if (!input_grad) {
    log_->F(gout);
    return -1;
  }
  const int64_t weight = Dequantize(z);
  const int64_t base = log_->A(z.in_e);
  log_->F(weight);
  log_->F(gout);
  log_->F(base);
  return update;
}

}  // namespace vramlab::server::estimate
