#include "worker/model/fused_layers.h"

#include <stdexcept>

#ifdef VRAMLAB_WITH_FUSED_KERNELS
#include "kernels/fused_ops.h"
#endif

namespace vramlab::worker {

#ifdef VRAMLAB_WITH_FUSED_KERNELS

bool FusedKernelsBuilt() { return true; }

torch::Tensor FusedRmsNormOp(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  return kernels::FusedRmsNorm(x, weight, eps);
}

std::pair<torch::Tensor, torch::Tensor> FusedRotaryOp(const torch::Tensor& q,
                                                      const torch::Tensor& k,
                                                      const torch::Tensor& cos,
                                                      const torch::Tensor& sin) {
  return kernels::FusedRotary(q, k, cos, sin);
}

torch::Tensor FusedSwiGluOp(const torch::Tensor& gate, const torch::Tensor& up) {
  return kernels::FusedSwiGlu(gate, up);
}

torch::Tensor FusedLinearCrossEntropyOp(const torch::Tensor& hidden, const torch::Tensor& weight,
                                        const torch::Tensor& targets, int64_t chunk_tokens,
                                        int64_t ignore_index) {
  return kernels::FusedLinearCrossEntropy(hidden, weight, targets, chunk_tokens, ignore_index);
}

#else

namespace {

[[noreturn]] void NotBuilt() {
  throw std::logic_error(
      "training.kernels FUSED: this worker was built without the CUDA kernels (kernels/)");
}

}  // namespace

bool FusedKernelsBuilt() { return false; }

torch::Tensor FusedRmsNormOp(const torch::Tensor&, const torch::Tensor&, double) { NotBuilt(); }

std::pair<torch::Tensor, torch::Tensor> FusedRotaryOp(const torch::Tensor&, const torch::Tensor&,
                                                      const torch::Tensor&, const torch::Tensor&) {
  NotBuilt();
}

torch::Tensor FusedSwiGluOp(const torch::Tensor&, const torch::Tensor&) { NotBuilt(); }

torch::Tensor FusedLinearCrossEntropyOp(const torch::Tensor&, const torch::Tensor&,
                                        const torch::Tensor&, int64_t, int64_t) {
  NotBuilt();
}

#endif

}  // namespace vramlab::worker
