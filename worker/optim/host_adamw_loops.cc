#include "worker/optim/host_adamw_loops.h"

#include <cmath>
#include <cstring>

namespace vramlab::worker::optim_internal {
namespace {

// Element access for the loop, branch-free so that the compiler vectorizes it. Store rounds to
// the value a tensor of this dtype stores.
struct Fp32 {
  using Stored = float;
  static float Load(const float* data, int64_t i) { return data[i]; }
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
  static float Load(const uint16_t* data, int64_t i) {
    return FromBits(static_cast<uint32_t>(data[i]) << 16);
  }
  static void Store(uint16_t* data, int64_t i, float x) {
    data[i] = static_cast<uint16_t>(RoundedBits(x) >> 16);
  }
};

// The values one element holds after the step, in fp32: param before its store's rounding.
struct Element {
  float param, avg, sq;
};

// AdamWUpdate's ops in their order, each rounded to fp32 as the fp32 ATen ops round.
inline Element Step(const AdamWFloatScalars& c, float param, float grad, float avg, float sq) {
  Element out;
  // p.mul_(1 - lr * wd)
  const float decayed = param * c.decay;
  // m.lerp_(g, 1 - beta1): ATen's formula for a weight below 0.5
  out.avg = avg + c.lerp_weight * (grad - avg);
  // v.mul_(beta2).addcmul_(g, g, 1 - beta2)
  out.sq = sq * c.beta2 + c.one_minus_beta2 * grad * grad;
  // denom = v.sqrt().div_(sqrt(bc2)).add_(eps)
  const float denom = std::sqrt(out.sq) / c.sqrt_bias_correction2 + c.eps;
  // p.addcdiv_(m, denom, -step_size)
  out.param = decayed + c.neg_step_size * out.avg / denom;
  return out;
}

// Stored values of type S, the update in fp32 (Step), each result rounded once as S
// stores it: for fp32 the ATen ops' update, for bf16 what a fused AdamW kernel computes (the
// update in fp32 from upcast values, one rounding per stored tensor).
template <typename S>
inline void UpdateRange(const AdamWFloatScalars& c, typename S::Stored* p,
                        const typename S::Stored* g, typename S::Stored* m, typename S::Stored* v,
                        int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const Element e = Step(c, S::Load(p, i), S::Load(g, i), S::Load(m, i), S::Load(v, i));
    S::Store(p, i, e.param);
    S::Store(m, i, e.avg);
    S::Store(v, i, e.sq);
  }
}

// fp32 master, moments and update; the gradient comes in, and the parameter goes out, as P.
// Upcasting a gradient is exact and P::Store rounds as ATen's copy_ does, so this is the fp32
// update followed by param.copy_(master), in one pass.
template <typename P>
inline void UpdateMasterRange(const AdamWFloatScalars& c, float* master,
                              const typename P::Stored* g, float* m, float* v,
                              typename P::Stored* param, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const Element e = Step(c, master[i], P::Load(g, i), m[i], v[i]);
    master[i] = e.param;
    m[i] = e.avg;
    v[i] = e.sq;
    P::Store(param, i, e.param);
  }
}

}  // namespace

// One clone per instruction set, picked at load time: AVX-512 (x86-64-v4: 16 lanes, masked
// blends for the bf16 rounding) where the CPU has it, else AVX2 (8 lanes), else SSE2. The
// file is compiled with -ffp-contract=off: v4 has FMA, and a fused multiply-add rounds once
// where the fp32 ATen ops round twice, so every clone must compute exactly what they compute.
#define VRAMLAB_HOST_LOOP __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
VRAMLAB_HOST_LOOP void UpdateRangeFp32(const AdamWFloatScalars& c, float* p, const float* g,
                                       float* m, float* v, int64_t begin, int64_t end) {
  UpdateRange<Fp32>(c, p, g, m, v, begin, end);
}
VRAMLAB_HOST_LOOP void UpdateRangeBf16(const AdamWFloatScalars& c, uint16_t* p, const uint16_t* g,
                                       uint16_t* m, uint16_t* v, int64_t begin, int64_t end) {
  UpdateRange<Bf16>(c, p, g, m, v, begin, end);
}
VRAMLAB_HOST_LOOP void UpdateMasterRangeFp32(const AdamWFloatScalars& c, float* master,
                                             const float* g, float* m, float* v, float* param,
                                             int64_t begin, int64_t end) {
  UpdateMasterRange<Fp32>(c, master, g, m, v, param, begin, end);
}
VRAMLAB_HOST_LOOP void UpdateMasterRangeBf16(const AdamWFloatScalars& c, float* master,
                                             const uint16_t* g, float* m, float* v, uint16_t* param,
                                             int64_t begin, int64_t end) {
  UpdateMasterRange<Bf16>(c, master, g, m, v, param, begin, end);
}
#undef VRAMLAB_HOST_LOOP

}  // namespace vramlab::worker::optim_internal
