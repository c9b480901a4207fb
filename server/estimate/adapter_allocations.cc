#include "server/estimate/adapter_allocations.h"

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
  return {alloc(tokens * f.in * e),
          alloc(tokens * f.in * ab),
          alloc(tokens * f.out * e),
          alloc(tokens * f.out * ab),
          alloc(n * e),
          alloc((n + 1) / 2 * 4),
          ab != e,
          projection <= kV,  // q, k and v have a bias
          f.wrapped};
}

int64_t AdapterAllocations::Dequantize(const Sizes& z) {
  const int64_t codes = log_->A(z.codes32);
  const int64_t weight = log_->A(z.weight);
  log_->F(codes);
  return weight;
}

int64_t AdapterAllocations::BlockAround(int64_t extra, int64_t bytes) {
  const int64_t block = log_->A(extra);
  const int64_t result = log_->A(bytes);
  log_->F(block);
  return result;
}

int64_t AdapterAllocations::Forward(AdapterProjection projection) {
  const Sizes& z = sizes_[projection];
  if (!z.wrapped) return log_->A(z.out_e);
  if (run_.adapter.dropout) {
    // The plain autograd path (LoraLinear::Update): what its call allocates beyond the output
    // (adapter_model.cc), as one block live while the output is made.
    return BlockAround(activations_.projection[projection].forward - z.out_e, z.out_e);
  }
  const int64_t x_cast = z.cast ? z.in_a : 0;
  if (!run_.adapter.qlora) {
    // LoraLinearFunction: the base output; x cast for A (freed after it); the base output
    // widened and addmm's sum; the sum cast back, the output.
    const int64_t base = log_->A(z.out_e);
    log_->T(x_cast);
    const int64_t wide = log_->A(z.cast ? z.out_a : 0);
    const int64_t sum = log_->A(z.out_a);
    log_->F(wide);
    if (!z.cast) {
      log_->F(base);
      return sum;
    }
    const int64_t out = log_->A(z.out_e);
    log_->F(sum), log_->F(base);
    return out;
  }
  // Nf4LoraLinear::Forward: Nf4Matmul (the weight freed after the product), the bias add; then
  // LoraUpdateFunction (x cast for A, B's output and its scaled copy), the update cast to the
  // base dtype and the sum.
  const int64_t weight = Dequantize(z);
  int64_t base = log_->A(z.out_e);
  log_->F(weight);
  if (z.bias) {
    const int64_t biased = log_->A(z.out_e);
    log_->F(base);
    base = biased;
  }
  log_->T(x_cast);
  const int64_t b_out = log_->A(z.out_a), scaled = log_->A(z.out_a);
  log_->F(b_out);
  const int64_t update = log_->A(z.cast ? z.out_e : 0);
  const int64_t out = log_->A(z.out_e);
  log_->F(update), log_->F(scaled), log_->F(base);
  return out;
}

int64_t AdapterAllocations::Backward(AdapterProjection projection) {
  const Sizes& z = sizes_[projection];
  if (!z.wrapped) return log_->A(z.in_e);
  if (run_.adapter.dropout) {
    return BlockAround(activations_.projection[projection].backward - z.in_e, z.in_e);
  }
  const int64_t x_cast = z.cast ? z.in_a : 0;
  if (!run_.adapter.qlora) {
    // LoraLinearFunction::backward: the gradient widened (held to the return); x cast again for
    // A's gradient; then grad·W, grad_h·A in the adapter dtype and its cast, and their sum (the
    // input's gradient).
    const int64_t wide = log_->A(z.cast ? z.out_a : 0);
    log_->T(x_cast);
    const int64_t base = log_->A(z.in_e);
    const int64_t update = log_->A(z.in_a);
    const int64_t update_cast = log_->A(z.cast ? z.in_e : 0);
    const int64_t in = log_->A(z.in_e);
    log_->F(update_cast), log_->F(update), log_->F(base), log_->F(wide);
    return in;
  }
  // The later node first: the widened gradient (ToCopyBackward), then LoraUpdateFunction: its
  // scaled copy, x cast again, grad_h·A in the adapter dtype and its cast (the update's input
  // gradient). Then Nf4MatmulFunction dequantises again and forms grad·W; the two are summed.
  const int64_t wide = log_->A(z.cast ? z.out_a : 0);
  const int64_t scaled = log_->A(z.out_a);
  log_->T(x_cast);
  const int64_t update32 = log_->A(z.in_a);
  int64_t update = update32;
  if (z.cast) {
    update = log_->A(z.in_e);
    log_->F(update32);
  }
  log_->F(scaled), log_->F(wide);
  const int64_t weight = Dequantize(z);
  const int64_t base = log_->A(z.in_e);
  log_->F(weight);
  const int64_t in = log_->A(z.in_e);
  log_->F(base), log_->F(update);
  return in;
}

}  // namespace vramlab::server::estimate
