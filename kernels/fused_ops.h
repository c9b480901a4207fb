// vramlab's fused CUDA ops (training.kernels FUSED, docs/KERNELS.md), each a
// torch::autograd::Function whose backward is a CUDA kernel of kernels/cuda/. Each saves for
// backward only what its backward reads, in the input dtype, plus small fp32 statistics.
//
// Inputs are CUDA tensors of one floating dtype (float32, float16 or bfloat16) on one device;
// a non-contiguous input is copied to a contiguous one first (each function says which inputs
// usually arrive contiguous). Outputs are contiguous. Violations throw c10::Error (TORCH_CHECK)
// naming the op and the offending shape or dtype.
#ifndef VRAMLAB_KERNELS_FUSED_OPS_H_
#define VRAMLAB_KERNELS_FUSED_OPS_H_

#include <cstdint>
#include <utility>

#include <torch/torch.h>

namespace vramlab::kernels {

// HF Qwen2RMSNorm over the last dimension: weight * round(x * rsqrt(mean(x^2) + eps)) with the
// statistics in fp32. x [..., dim] (a layer's residual stream: contiguous), weight [dim].
// Saves x and the per-row rstd (fp32).
torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// HF apply_rotary_pos_emb on q [b, s, heads, d] and k [b, s, kv_heads, d] (the projections'
// outputs viewed per head: contiguous), cos and sin [s, d] (shared by every layer). Returns the
// rotated q and k, contiguous [b, s, *, d]. Saves cos and sin only.
std::pair<torch::Tensor, torch::Tensor> FusedRotary(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& cos,
                                                    const torch::Tensor& sin);

// silu(gate) * up for gate and up of one shape (the gate and up projections' outputs:
// contiguous). Saves gate and up.
torch::Tensor FusedSwiGlu(const torch::Tensor& gate, const torch::Tensor& up);

// Mean cross-entropy of hidden [n, h] x weight [v, h]^T against targets [n] (int64; ignore_index
// rows count for nothing), as the ATen path's fp32 cross-entropy of the parameter-dtype logits.
// Works chunk_tokens rows at a time: one chunk's logits [chunk, v] in the parameter dtype exist
// at once; cuBLAS (through ATen) computes them, a kernel turns them into the loss and, in place,
// into their gradient, and the gradients of hidden and weight are accumulated chunk by chunk
// during the forward (weight's in the parameter dtype). Saves those two gradients (scaled by the
// loss's incoming gradient in backward); the full-vocab logits of all rows never exist unless
// chunk_tokens >= n. Gradients are formed only where grad mode is on and an input requires one.
// The backward scales the saved gradients in place, so it runs once per forward (no
// retain_graph through this op).
torch::Tensor FusedLinearCrossEntropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                      const torch::Tensor& targets, int64_t chunk_tokens,
                                      int64_t ignore_index);

}  // namespace vramlab::kernels

#endif  // VRAMLAB_KERNELS_FUSED_OPS_H_
