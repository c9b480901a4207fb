#include "worker/model/attention.h"

#include <limits>
#include <stdexcept>

#include <torch/version.h>

// at::scaled_dot_product_attention and at::_fused_sdp_choice grew arguments over 2.x: `scale` in
// 2.1, `enable_gqa` in 2.5. Defaults are equal to what this model passes when they are absent.
#define VRAMLAB_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace vramlab::worker {

torch::Tensor RepeatKv(const torch::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto b = x.size(0), kv_heads = x.size(1), s = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, kv_heads, n_rep, s, d}).reshape({b, kv_heads * n_rep, s, d});
}

namespace {

// finfo(dtype).min, as HF uses: exp() of it underflows to exactly 0 in the fp32 softmax.
double LowestValue(torch::Dtype dtype) {
  return dtype == torch::kFloat64    ? std::numeric_limits<double>::lowest()
         : dtype == torch::kFloat32  ? std::numeric_limits<float>::lowest()
         : dtype == torch::kBFloat16 ? -3.3895313892515355e38
                                     : -65504.0;
}

}  // namespace

torch::Tensor CausalMask(int64_t seq_len, torch::Dtype dtype, torch::Device device) {
  auto options = torch::TensorOptions().dtype(dtype).device(device);
  return torch::full({seq_len, seq_len}, LowestValue(dtype), options).triu_(1);
}

torch::Tensor SlidingWindowAllowed(int64_t seq_len, int64_t window, torch::Device device) {
  auto options = torch::TensorOptions().dtype(torch::kBool).device(device);
  // Lower triangle (kv <= q) minus the diagonals at or below -window (q - kv >= window).
  return torch::ones({seq_len, seq_len}, options)
      .tril_(0)
      .logical_and_(torch::ones({seq_len, seq_len}, options).triu_(-(window - 1)));
}

torch::Tensor SlidingWindowMask(int64_t seq_len, int64_t window, torch::Dtype dtype,
                                torch::Device device) {
  auto options = torch::TensorOptions().dtype(dtype).device(device);
  return torch::zeros({seq_len, seq_len}, options)
      .masked_fill_(SlidingWindowAllowed(seq_len, window, device).logical_not_(),
                    LowestValue(dtype));
}

torch::Tensor EagerAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& causal_mask, double scaling) {
  const int64_t n_rep = q.size(1) / k.size(1);
  torch::Tensor keys = RepeatKv(k, n_rep);
  torch::Tensor values = RepeatKv(v, n_rep);
  // Out-of-place on purpose: the lab measures what HF eager costs, temporaries included.
  torch::Tensor scores = torch::matmul(q, keys.transpose(2, 3)) * scaling;
  scores = scores + causal_mask;
  torch::Tensor probs = torch::softmax(scores, /*dim=*/-1, torch::kFloat32).to(q.scalar_type());
  return torch::matmul(probs, values).transpose(1, 2).contiguous();
}

bool SdpaAvailable() { return VRAMLAB_TORCH_AT_LEAST(2, 0); }

bool SdpaNativeGqaAvailable() { return VRAMLAB_TORCH_AT_LEAST(2, 5); }

#if VRAMLAB_TORCH_AT_LEAST(2, 0)
namespace {

std::string SdpBackendName(int64_t choice) {
  switch (choice) {  // sdp::SDPBackend numbering
    case 0:
      return "math";
    case 1:
      return "flash";
    case 2:
      return "efficient";
    case 3:
      return "cudnn";
    case 4:
      return "overrideable";
    default:
      return "unknown (" + std::to_string(choice) + ")";
  }
}

}  // namespace
#endif

torch::Tensor SdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            double scaling, bool native_gqa, std::string* backend,
                            const torch::Tensor& allowed) {
#if VRAMLAB_TORCH_AT_LEAST(2, 0)
  const bool enable_gqa = native_gqa && SdpaNativeGqaAvailable();
  const int64_t n_rep = enable_gqa ? 1 : q.size(1) / k.size(1);
  torch::Tensor keys = RepeatKv(k, n_rep);
  torch::Tensor values = RepeatKv(v, n_rep);
#if VRAMLAB_TORCH_AT_LEAST(2, 5)
#define VRAMLAB_SDPA_EXTRA_ARGS , scaling, enable_gqa
#elif VRAMLAB_TORCH_AT_LEAST(2, 1)
#define VRAMLAB_SDPA_EXTRA_ARGS , scaling
#else
#define VRAMLAB_SDPA_EXTRA_ARGS
#endif
  const bool is_causal = !allowed.defined();
  const c10::optional<at::Tensor> attn_mask =
      is_causal ? c10::optional<at::Tensor>() : c10::optional<at::Tensor>(allowed);
  if (backend != nullptr) {
    try {
      *backend = SdpBackendName(at::_fused_sdp_choice(q, keys, values, attn_mask,
                                                      /*dropout_p=*/0.0,
                                                      is_causal VRAMLAB_SDPA_EXTRA_ARGS));
    } catch (const c10::Error&) {
      *backend = "unknown";  // the attention call below reports the real problem
    }
    if (enable_gqa && q.size(1) != k.size(1)) *backend += ", native GQA";
  }
  torch::Tensor out = at::scaled_dot_product_attention(
      q, keys, values, attn_mask, /*dropout_p=*/0.0, is_causal VRAMLAB_SDPA_EXTRA_ARGS);
#undef VRAMLAB_SDPA_EXTRA_ARGS
  return out.transpose(1, 2).contiguous();
#else
  (void)q, (void)k, (void)v, (void)scaling, (void)native_gqa, (void)backend, (void)allowed;
  throw std::logic_error("scaled_dot_product_attention needs LibTorch 2.x");
#endif
}

}  // namespace vramlab::worker
