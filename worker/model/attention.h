// The two attention kernels of the decoder. Both take q [b, heads, s, d] and k/v
// [b, kv_heads, s, d] after the rotary embedding and return [b, s, heads, d] (contiguous).
#ifndef VRAMLAB_WORKER_MODEL_ATTENTION_H_
#define VRAMLAB_WORKER_MODEL_ATTENTION_H_

#include <string>

#include <torch/torch.h>

namespace vramlab::worker {

enum class AttentionImpl { kEager, kSdpa };

// True when at::scaled_dot_product_attention exists (LibTorch 2.x).
bool SdpaAvailable();

// The additive causal mask of HF eager attention: 0 where a query may attend, the dtype's lowest
// value above the diagonal; [s, s] in `dtype` (HF builds [b, 1, s, s]; broadcasting is equal).
torch::Tensor CausalMask(int64_t seq_len, torch::Dtype dtype, torch::Device device);

// The additive mask of a sliding window of `window` tokens (HF's sliding_window_overlay on the
// causal mask): 0 where kv <= q and q - kv < window, the dtype's lowest value elsewhere; [s, s].
torch::Tensor SlidingWindowMask(int64_t seq_len, int64_t window, torch::Dtype dtype,
                                torch::Device device);

// The same window as a boolean mask for sdpa, true where a query may attend; [s, s].
torch::Tensor SlidingWindowAllowed(int64_t seq_len, int64_t window, torch::Device device);

// HF's eager_attention_forward, op for op, so that its memory matches HF eager: scores in the
// parameter dtype, softmax in fp32, probabilities cast back, kv heads repeated for GQA.
torch::Tensor EagerAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& causal_mask, double scaling);

// True when at::scaled_dot_product_attention takes enable_gqa (LibTorch >= 2.5).
bool SdpaNativeGqaAvailable();

// at::scaled_dot_product_attention with is_causal, or with `allowed` (a boolean [s, s] mask,
// true: attend; SlidingWindowAllowed) as attn_mask and is_causal false when it is defined, as HF's
// sdpa path passes a sliding window. Only on LibTorch 2.x (throws std::logic_error
// elsewhere: callers fall back to EagerAttention). GQA: kv heads are repeated (as HF does before
// torch 2.5), or with native_gqa and LibTorch >= 2.5 passed as they are with enable_gqa (as HF
// does from torch 2.5 on; sdpa then keeps the un-repeated K/V for backward). When `backend` is not
// null it receives the fused backend chosen for these inputs: "flash", "efficient", "cudnn",
// "math", ... (asked of at::_fused_sdp_choice, which makes the same choice), followed by
// ", native GQA" where K/V went in un-repeated.
torch::Tensor SdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            double scaling, bool native_gqa, std::string* backend = nullptr,
                            const torch::Tensor& allowed = torch::Tensor());

// [b, kv_heads, s, d] -> [b, kv_heads * n_rep, s, d], kv head j serving query heads
// j*n_rep .. (j+1)*n_rep-1 (HF's repeat_kv). Returns x itself when n_rep == 1.
torch::Tensor RepeatKv(const torch::Tensor& x, int64_t n_rep);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MODEL_ATTENTION_H_
