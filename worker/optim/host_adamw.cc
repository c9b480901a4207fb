#include "worker/optim/host_adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

namespace vramlab::worker::optim_internal {
namespace {

// Below this many elements per thread, another thread costs more than it saves.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 18;

// Element access for the loop, branch-free so that the compiler vectorizes it. Round(x) is the
// fp32 value a tensor of this dtype stores for x.
struct Fp32 {
  using Stored = float;
  static float Load(const float* data, int64_t i) { return data[i]; }
  static float Round(float x) { return x; }
  static void Store(float* data, int64_t i, float x) { data[i] = x; }
};

// bf16 as raw 16-bit words: round to nearest even and NaN made canonical (0x7fc0), exactly as
// c10::BFloat16's constructor does, but as a select rather than a branch.
struct Bf16 {
  using Stored = uint16_t;
  static float FromBits(uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    return x;
  }
  static uint32_t RoundedBits(float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    return (bits & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : rounded;
  }
  static float Load(const uint16_t* data, int64_t i) { return FromBits(static_cast<uint32_t>(data[i]) << 16); }
  static float Round(float x) { return FromBits(RoundedBits(x)); }
  static void Store(uint16_t* data, int64_t i, float x) { data[i] = static_cast<uint16_t>(RoundedBits(x) >> 16); }
};

// Scalars as ATen hands them to a float kernel: double arguments cast to float.
struct Coefficients {
  float decay, lerp_weight, beta2, one_minus_beta2, sqrt_bias_correction2, eps, neg_step_size;
};

template <typename D>
inline void UpdateRange(const Coefficients& c, typename D::Stored* p, const typename D::Stored* g,
                 typename D::Stored* m, typename D::Stored* v, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float grad = D::Load(g, i);
    // p.mul_(1 - lr * wd)
    const float param = D::Round(D::Load(p, i) * c.decay);
    // m.lerp_(g, 1 - beta1): ATen's formula for a weight below 0.5
    const float avg = D::Load(m, i);
    const float new_avg = D::Round(avg + c.lerp_weight * (grad - avg));
    // v.mul_(beta2).addcmul_(g, g, 1 - beta2)
    const float sq = D::Round(D::Load(v, i) * c.beta2);
    const float new_sq = D::Round(sq + c.one_minus_beta2 * grad * grad);
    // denom = v.sqrt().div_(sqrt(bc2)).add_(eps)
    float denom = D::Round(std::sqrt(new_sq));
    denom = D::Round(denom / c.sqrt_bias_correction2);
    denom = D::Round(denom + c.eps);
    // p.addcdiv_(m, denom, -step_size)
    D::Store(p, i, param + c.neg_step_size * new_avg / denom);
    D::Store(m, i, new_avg);
    D::Store(v, i, new_sq);
  }
}

// One clone per instruction set, picked at load time: AVX2 where the CPU has it (8 lanes and
// blends for the bf16 rounding), SSE2 otherwise.
__attribute__((target_clones("avx2", "default"))) void UpdateRangeFp32(
    const Coefficients& c, float* p, const float* g, float* m, float* v, int64_t begin, int64_t end) {
  UpdateRange<Fp32>(c, p, g, m, v, begin, end);
}
__attribute__((target_clones("avx2", "default"))) void UpdateRangeBf16(
    const Coefficients& c, uint16_t* p, const uint16_t* g, uint16_t* m, uint16_t* v, int64_t begin,
    int64_t end) {
  UpdateRange<Bf16>(c, p, g, m, v, begin, end);
}

template <typename D>
void Update(const Coefficients& c, typename D::Stored* p, const typename D::Stored* g,
            typename D::Stored* m, typename D::Stored* v, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<D, Fp32>) {
    UpdateRangeFp32(c, p, g, m, v, begin, end);
  } else {
    UpdateRangeBf16(c, p, g, m, v, begin, end);
  }
}

template <typename D>
void RunThreads(const Coefficients& c, const torch::Tensor& param, const torch::Tensor& grad,
                const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  using S = typename D::Stored;
  S* p = static_cast<S*>(param.data_ptr());
  const S* g = static_cast<const S*>(grad.data_ptr());
  S* m = static_cast<S*>(exp_avg.data_ptr());
  S* v = static_cast<S*>(exp_avg_sq.data_ptr());
  const int64_t n = param.numel();
  const int64_t by_size = std::max<int64_t>(1, n / kMinElementsPerThread);
  const int64_t threads = std::min<int64_t>(by_size, std::max(1, at::get_num_threads()));
  if (threads == 1) {
    Update<D>(c, p, g, m, v, 0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  const int64_t per_thread = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = std::min(n, t * per_thread), end = std::min(n, begin + per_thread);
    pool.emplace_back([&c, p, g, m, v, begin, end] { Update<D>(c, p, g, m, v, begin, end); });
  }
  Update<D>(c, p, g, m, v, 0, std::min(n, per_thread));
  for (std::thread& thread : pool) thread.join();
}

}  // namespace

bool HostAdamWSupported(const torch::Tensor& param, const torch::Tensor& grad,
                        const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  const torch::ScalarType dtype = param.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kBFloat16) return false;
  for (const torch::Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq}) {
    if (!t->device().is_cpu() || t->scalar_type() != dtype || !t->is_contiguous() ||
        t->numel() != param.numel()) {
      return false;
    }
  }
  return true;
}

void HostAdamW(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
               const torch::Tensor& grad, const torch::Tensor& exp_avg,
               const torch::Tensor& exp_avg_sq) {
  if (!HostAdamWSupported(param, grad, exp_avg, exp_avg_sq)) {
    throw std::invalid_argument("HostAdamW needs contiguous CPU tensors of one dtype, float or bf16");
  }
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(step));
  Coefficients c;
  c.decay = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay);
  c.lerp_weight = static_cast<float>(1.0 - hyper.beta1);
  c.beta2 = static_cast<float>(hyper.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2);
  c.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bias_correction2));
  c.eps = static_cast<float>(hyper.eps);
  c.neg_step_size = static_cast<float>(-(hyper.lr / bias_correction1));
  if (param.scalar_type() == torch::kFloat) {
    RunThreads<Fp32>(c, param, grad, exp_avg, exp_avg_sq);
  } else {
    RunThreads<Bf16>(c, param, grad, exp_avg, exp_avg_sq);
  }
}

void AdamWUpdateForState(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
                         const torch::Tensor& grad, const torch::Tensor& exp_avg,
                         const torch::Tensor& exp_avg_sq) {
  if (exp_avg.is_pinned() && HostAdamWSupported(param, grad, exp_avg, exp_avg_sq)) {
    HostAdamW(hyper, step, param, grad, exp_avg, exp_avg_sq);
  } else {
    AdamWUpdate(hyper, step, param, grad, exp_avg, exp_avg_sq);
  }
}

}  // namespace vramlab::worker::optim_internal
