// A projection wrapped by an adapter (worker/adapters/: lora_linear.cc, nf4_linear.cc, nf4.cc),
// tensor by tensor in the order its forward and backward allocate and free: LoRA's one autograd
// node with its casts; QLoRA's dequantised weight (the codes widened to int32, then the looked-up
// weight, in forward and again in backward), the bias, the update and the sum. The sizes and what
// lives together are adapter_model.h's ProjectionActivations, so the replay's peaks are the step
// walk's. Part of layer_allocations.h's plan; a projection no adapter wraps allocates only its
// output (or its input's gradient).
#ifndef VRAMLAB_SERVER_ESTIMATE_ADAPTER_ALLOCATIONS_H_
#define VRAMLAB_SERVER_ESTIMATE_ADAPTER_ALLOCATIONS_H_

#include <array>
#include <cstdint>
#include <functional>

#include "absl/functional/function_ref.h"
#include "server/estimate/adapter_model.h"
#include "server/estimate/allocation_log.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// Writes into `log`, which must outlive it.
class AdapterAllocations {
 public:
  AdapterAllocations(const RunSettings& run, AllocationLog* log);

  // The projection's forward; returns its output (what was live before stays live). A wrapped
  // projection's node saves A's output: its id goes to `saved_h` (-1 for none); with a null
  // `saved_h` (no autograd) it is freed as the call returns.
  int64_t Forward(AdapterProjection projection, int64_t* saved_h);
  // The projection's backward from the gradient of its output, `gout`, which it frees as its last
  // node returns unless `gout` is -1 (held by the caller); returns the gradient of its input (-1
  // unless `input_grad`). Calls `gradient("lora_B")` and `gradient("lora_A")` where a wrapped
  // projection's node makes its adapter's gradients, and `saved_released()` where the last node
  // that saved the projection's input has run: QLoRA's LoraUpdateFunction, before the base
  // product's node (which saves only the codes); else the projection's one node, after `gout`.
  // `into` (-1: none) is a gradient of the same input already waiting in the next node's buffer:
  // each of the projection's nodes' input gradients is added into it in place and freed, and
  // `into` is returned (autograd's in-place accumulation; the caller passes one only where the
  // recorded traces show it: QLoRA).
  int64_t Backward(AdapterProjection projection, bool input_grad, int64_t gout, int64_t into,
                   const std::function<void(const char*)>& gradient,
                   absl::FunctionRef<void()> saved_released);

 private:
  struct Sizes {
    int64_t in_e, in_a, out_e, out_a, rank_a, weight, codes32;
    int64_t absmax32, absmax_e;  // one value per NF4 block: fp32 / int32, the base dtype
    bool cast, bias, wrapped;
  };
  static Sizes SizesOf(const RunSettings& run, AdapterProjection projection);
  // x cast to the adapter dtype (`x_cast` bytes, freed after) and A's output; returns the output.
  int64_t CastAndProject(int64_t x_cast, const Sizes& z);
  // DequantizeNf4: the codes widened to int32, then the weight; then Nf4Absmax (the absmax codes
  // widened to int32, their decoded values, the offset added) cast to the base dtype for the
  // in-place scaling. Returns the weight.
  int64_t Dequantize(const Sizes& z);
  // A tensor of `bytes` (returned) made while one block of `extra` bytes is live: a call's
  // tensors beyond its result where they are not listed one by one.
  int64_t BlockAround(int64_t extra, int64_t bytes);

  const RunSettings& run_;
  AllocationLog* const log_;
  const AdapterActivations activations_;
  std::array<Sizes, kNumProjections> sizes_;  // by projection, computed once
};

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ADAPTER_ALLOCATIONS_H_
