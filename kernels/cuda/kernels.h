// The raw CUDA kernels behind kernels/fused_ops.h: plain pointers, sizes and a stream, no LibTorch.
// Every pointer is device memory of a contiguous row-major array whose element type is `type`
// (fp32 statistics and buffers are `float*`). Each function enqueues its kernels on `stream` and
// returns the launch's error (cudaSuccess when enqueued); it never synchronizes.
//
// Numerics: elements are read as fp32, every reduction accumulates in fp32 (warp shuffles, then
// one value per warp through shared memory), and each intermediate that the ATen path rounds to
// the element type is rounded the same way here, so that a bf16 result differs from the ATen
// path's only by the order of fp32 summation.
#ifndef VRAMLAB_KERNELS_CUDA_KERNELS_H_
#define VRAMLAB_KERNELS_CUDA_KERNELS_H_

#include <cstdint>

#include <cuda_runtime_api.h>

namespace vramlab::kernels::cuda {

enum class ElementType { kFloat32, kFloat16, kBFloat16 };

// --- RMSNorm (HF Qwen2RMSNorm) ------------------------------------------------------------------
// x, y: [rows, dim]; weight: [dim]; rstd: [rows] fp32, written with 1 / sqrt(mean(x^2) + eps).
// y = weight * round(x * rstd), the product rounded to the element type.
cudaError_t RmsNormForward(ElementType type, const void* x, const void* weight, void* y,
                           float* rstd, int64_t rows, int64_t dim, float eps, cudaStream_t stream);

// The number of partial rows RmsNormBackward's weight gradient needs for `rows` rows on a device
// with `multiprocessors` SMs (the size of dweight_partial is that times dim floats).
int64_t RmsNormBackwardPartialRows(int64_t rows, int multiprocessors);

// dy, x, dx: [rows, dim]; weight, dweight: [dim]; rstd: [rows] from the forward. dweight_partial
// is scratch of RmsNormBackwardPartialRows(rows, ...) x dim floats; partial_rows is that count.
cudaError_t RmsNormBackward(ElementType type, const void* dy, const void* x, const void* weight,
                            const float* rstd, void* dx, void* dweight, float* dweight_partial,
                            int64_t partial_rows, int64_t rows, int64_t dim, cudaStream_t stream);

// --- Rotary embedding (HF apply_rotary_pos_emb) -------------------------------------------------
// x, out: [tokens, heads, head_dim] with token = batch_index * seq_len + position; cos, sin:
// [seq_len, head_dim]. Forward: out = x * cos + rotate_half(x) * sin. Backward (x is dout, out is
// dx): dx = dout * cos + rotate_half^T(dout * sin). head_dim is even.
cudaError_t RotaryForward(ElementType type, const void* x, const void* cos, const void* sin,
                          void* out, int64_t tokens, int64_t seq_len, int64_t heads,
                          int64_t head_dim, cudaStream_t stream);
cudaError_t RotaryBackward(ElementType type, const void* dout, const void* cos, const void* sin,
                           void* dx, int64_t tokens, int64_t seq_len, int64_t heads,
                           int64_t head_dim, cudaStream_t stream);

// --- SwiGLU: out = silu(gate) * up, elementwise over n elements ---------------------------------
cudaError_t SwigluForward(ElementType type, const void* gate, const void* up, void* out, int64_t n,
                          cudaStream_t stream);
cudaError_t SwigluBackward(ElementType type, const void* dout, const void* gate, const void* up,
                           void* dgate, void* dup, int64_t n, cudaStream_t stream);

// --- Cross-entropy over one chunk of logits, gradient in place ----------------------------------
// logits: [rows, vocab]; targets: [rows] int64, ignore_index marks rows that count for nothing;
// count: one fp32 on the device, the number of counted rows of the whole batch. Writes
// row_loss[r] = logsumexp(logits[r]) - logits[r, target] for counted rows, 0 for ignored ones.
// With write_grad, logits[r] is then overwritten by d(mean loss)/d(logits[r]) =
// (softmax(logits[r]) - onehot(target)) / count (0 for ignored rows), rounded to the element type.
// A counted row's target must lie in [0, vocab).
cudaError_t CrossEntropyChunk(ElementType type, void* logits, const int64_t* targets,
                              int64_t ignore_index, const float* count, float* row_loss,
                              int64_t rows, int64_t vocab, bool write_grad, cudaStream_t stream);

}  // namespace vramlab::kernels::cuda

#endif  // VRAMLAB_KERNELS_CUDA_KERNELS_H_
