#include "worker/optim/host_adamw.h"

#include "worker/optim/host_thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
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

using Coefficients = AdamWFloatScalars;

// The values one element holds after the step: avg and sq rounded to D as their tensors store
// them, param before its store's rounding.
struct Element {
  float param, avg, sq;
};

template <typename D>
inline Element Step(const Coefficients& c, float param, float grad, float avg, float sq) {
  Element out;
  // p.mul_(1 - lr * wd)
  const float decayed = D::Round(param * c.decay);
  // m.lerp_(g, 1 - beta1): ATen's formula for a weight below 0.5
  out.avg = D::Round(avg + c.lerp_weight * (grad - avg));
  // v.mul_(beta2).addcmul_(g, g, 1 - beta2)
  out.sq = D::Round(D::Round(sq * c.beta2) + c.one_minus_beta2 * grad * grad);
  // denom = v.sqrt().div_(sqrt(bc2)).add_(eps)
  float denom = D::Round(std::sqrt(out.sq));
  denom = D::Round(denom / c.sqrt_bias_correction2);
  denom = D::Round(denom + c.eps);
  // p.addcdiv_(m, denom, -step_size)
  out.param = decayed + c.neg_step_size * out.avg / denom;
  return out;
}

template <typename D>
inline void UpdateRange(const Coefficients& c, typename D::Stored* p, const typename D::Stored* g,
                        typename D::Stored* m, typename D::Stored* v, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const Element e = Step<D>(c, D::Load(p, i), D::Load(g, i), D::Load(m, i), D::Load(v, i));
    D::Store(p, i, e.param);
    D::Store(m, i, e.avg);
    D::Store(v, i, e.sq);
  }
}

// fp32 master, moments and update; the gradient comes in, and the parameter goes out, as P.
// Upcasting a gradient is exact and P::Store rounds as ATen's copy_ does, so this is the fp32
// update followed by param.copy_(master), in one pass.
template <typename P>
inline void UpdateMasterRange(const Coefficients& c, float* master, const typename P::Stored* g,
                              float* m, float* v, typename P::Stored* param, int64_t begin,
                              int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const Element e = Step<Fp32>(c, master[i], P::Load(g, i), m[i], v[i]);
    master[i] = e.param;
    m[i] = e.avg;
    v[i] = e.sq;
    P::Store(param, i, e.param);
  }
}

// One clone per instruction set, picked at load time: AVX2 where the CPU has it (8 lanes and
// blends for the bf16 rounding), SSE2 otherwise.
#define VRAMLAB_HOST_LOOP __attribute__((target_clones("avx2", "default")))
VRAMLAB_HOST_LOOP void UpdateRangeFp32(const Coefficients& c, float* p, const float* g, float* m,
                                       float* v, int64_t begin, int64_t end) {
  UpdateRange<Fp32>(c, p, g, m, v, begin, end);
}
VRAMLAB_HOST_LOOP void UpdateRangeBf16(const Coefficients& c, uint16_t* p, const uint16_t* g,
                                       uint16_t* m, uint16_t* v, int64_t begin, int64_t end) {
  UpdateRange<Bf16>(c, p, g, m, v, begin, end);
}
VRAMLAB_HOST_LOOP void UpdateMasterRangeFp32(const Coefficients& c, float* master, const float* g,
                                             float* m, float* v, float* param, int64_t begin,
                                             int64_t end) {
  UpdateMasterRange<Fp32>(c, master, g, m, v, param, begin, end);
}
VRAMLAB_HOST_LOOP void UpdateMasterRangeBf16(const Coefficients& c, float* master, const uint16_t* g,
                                             float* m, float* v, uint16_t* param, int64_t begin,
                                             int64_t end) {
  UpdateMasterRange<Bf16>(c, master, g, m, v, param, begin, end);
}
#undef VRAMLAB_HOST_LOOP

// Runs body(begin, end) over [0, n) split evenly across up to LibTorch's intra-op thread count,
// on the calling thread and the persistent host threads.
template <typename Body>
void ParallelRanges(int64_t n, const Body& body) {
  const int64_t by_size = std::max<int64_t>(1, n / kMinElementsPerThread);
  const int64_t threads = std::min<int64_t>(by_size, std::max(1, at::get_num_threads()));
  const int64_t per_thread = (n + threads - 1) / threads;
  RunOnHostThreads(static_cast<int>(threads), [&body, n, per_thread](int t) {
    const int64_t begin = std::min(n, t * per_thread), end = std::min(n, begin + per_thread);
    body(begin, end);
  });
}

bool ContiguousCpu(const torch::Tensor& t, torch::ScalarType dtype, int64_t numel) {
  return t.device().is_cpu() && t.scalar_type() == dtype && t.is_contiguous() && t.numel() == numel;
}

template <typename T>
T* Data(const torch::Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

}  // namespace

bool HostAdamWSupported(const torch::Tensor& param, const torch::Tensor& grad,
                        const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  const torch::ScalarType dtype = param.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kBFloat16) return false;
  const int64_t n = param.numel();
  for (const torch::Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq}) {
    if (!ContiguousCpu(*t, dtype, n)) return false;
  }
  return true;
}

void HostAdamW(const AdamWHyper& hyper, int64_t step, const torch::Tensor& param,
               const torch::Tensor& grad, const torch::Tensor& exp_avg,
               const torch::Tensor& exp_avg_sq) {
  if (!HostAdamWSupported(param, grad, exp_avg, exp_avg_sq)) {
    throw std::invalid_argument("HostAdamW needs contiguous CPU tensors of one dtype, float or bf16");
  }
  const Coefficients c = FloatScalarsAt(hyper, step);
  if (param.scalar_type() == torch::kFloat) {
    float *p = Data<float>(param), *g = Data<float>(grad), *m = Data<float>(exp_avg),
          *v = Data<float>(exp_avg_sq);
    ParallelRanges(param.numel(),
                   [&](int64_t b, int64_t e) { UpdateRangeFp32(c, p, g, m, v, b, e); });
  } else {
    uint16_t *p = Data<uint16_t>(param), *g = Data<uint16_t>(grad), *m = Data<uint16_t>(exp_avg),
             *v = Data<uint16_t>(exp_avg_sq);
    ParallelRanges(param.numel(),
                   [&](int64_t b, int64_t e) { UpdateRangeBf16(c, p, g, m, v, b, e); });
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

bool HostAdamWMasterSupported(const torch::Tensor& master, const torch::Tensor& grad,
                              const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                              const torch::Tensor& param) {
  const torch::ScalarType dtype = param.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kBFloat16) return false;
  const int64_t n = master.numel();
  return ContiguousCpu(master, torch::kFloat, n) && ContiguousCpu(exp_avg, torch::kFloat, n) &&
         ContiguousCpu(exp_avg_sq, torch::kFloat, n) && ContiguousCpu(grad, dtype, n) &&
         ContiguousCpu(param, dtype, n);
}

void HostAdamWMaster(const AdamWHyper& hyper, int64_t step, const torch::Tensor& master,
                     const torch::Tensor& grad, const torch::Tensor& exp_avg,
                     const torch::Tensor& exp_avg_sq, const torch::Tensor& param) {
  if (!HostAdamWMasterSupported(master, grad, exp_avg, exp_avg_sq, param)) {
    throw std::invalid_argument(
        "HostAdamWMaster needs contiguous CPU tensors: fp32 master and moments, gradient and "
        "parameter of one dtype, float or bf16");
  }
  const Coefficients c = FloatScalarsAt(hyper, step);
  float *w = Data<float>(master), *m = Data<float>(exp_avg), *v = Data<float>(exp_avg_sq);
  if (param.scalar_type() == torch::kFloat) {
    float *g = Data<float>(grad), *p = Data<float>(param);
    ParallelRanges(master.numel(),
                   [&](int64_t b, int64_t e) { UpdateMasterRangeFp32(c, w, g, m, v, p, b, e); });
  } else {
    uint16_t *g = Data<uint16_t>(grad), *p = Data<uint16_t>(param);
    ParallelRanges(master.numel(),
                   [&](int64_t b, int64_t e) { UpdateMasterRangeBf16(c, w, g, m, v, p, b, e); });
  }
}

void AdamWMasterUpdateForState(const AdamWHyper& hyper, int64_t step, const torch::Tensor& master,
                               const torch::Tensor& grad, const torch::Tensor& exp_avg,
                               const torch::Tensor& exp_avg_sq, const torch::Tensor& param) {
  if (exp_avg.is_pinned() && HostAdamWMasterSupported(master, grad, exp_avg, exp_avg_sq, param)) {
    HostAdamWMaster(hyper, step, master, grad, exp_avg, exp_avg_sq, param);
    return;
  }
  AdamWUpdate(hyper, step, master, grad.to(torch::kFloat), exp_avg, exp_avg_sq);
  param.copy_(master);
}

}  // namespace vramlab::worker::optim_internal
