// The model's door to kernels/ (training.kernels FUSED): the fused ops where the worker was built
// with them (VRAMLAB_WITH_FUSED_KERNELS), and a clear error where it was not. Spec validation
// refuses FUSED in such a worker (ValidateKernelsRunnable), so the error is for direct callers.
#ifndef VRAMLAB_WORKER_MODEL_FUSED_LAYERS_H_
#define VRAMLAB_WORKER_MODEL_FUSED_LAYERS_H_

#include <cstdint>
#include <utility>

#include <torch/torch.h>

namespace vramlab::worker {

// Which code computes RMSNorm, rotary, SwiGLU and the loss (docs/KERNELS.md).
enum class KernelsImpl {
  kAten,   // ATen operators: numerically HF transformers' eager modules
  kFused,  // kernels/fused_ops.h, CUDA only
};

// Whether this worker was built with kernels/.
bool FusedKernelsBuilt();

// kernels::FusedRmsNorm, FusedRotary, FusedSwiGlu and FusedLinearCrossEntropy (fused_ops.h has
// their contracts). Throw std::logic_error where FusedKernelsBuilt() is false.
torch::Tensor FusedRmsNormOp(const torch::Tensor& x, const torch::Tensor& weight, double eps);
std::pair<torch::Tensor, torch::Tensor> FusedRotaryOp(const torch::Tensor& q,
                                                      const torch::Tensor& k,
                                                      const torch::Tensor& cos,
                                                      const torch::Tensor& sin);
torch::Tensor FusedSwiGluOp(const torch::Tensor& gate, const torch::Tensor& up);
torch::Tensor FusedLinearCrossEntropyOp(const torch::Tensor& hidden, const torch::Tensor& weight,
                                        const torch::Tensor& targets, int64_t chunk_tokens,
                                        int64_t ignore_index);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_FUSED_LAYERS_H_
