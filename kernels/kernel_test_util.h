// What the kernel tests share: error measures against a reference, the two acceptance rules of
// docs/KERNELS.md ("Tests") and seeded inputs on the GPU.
//
//   fp32: the fused result is within 1e-5 of the ATen path's, relative to the largest magnitude of
//         the ATen result (max |fused - aten| <= 1e-5 * max |aten|).
//   bf16/fp16: the fused result's error against the exact result (the ATen path's formula in fp64
//         on the same rounded inputs) is at most kLowPrecisionSlack times the ATen path's own
//         error against it, in max and in mean absolute error (plus a floor of 1e-6 of the
//         reference's magnitude, for results the ATen path gets exactly right).
#ifndef VRAMLAB_KERNELS_KERNEL_TEST_UTIL_H_
#define VRAMLAB_KERNELS_KERNEL_TEST_UTIL_H_

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace vramlab::kernels::testing {

inline constexpr double kFp32Relative = 1e-5;
inline constexpr double kLowPrecisionSlack = 1.5;

struct Error {
  double max_abs = 0;   // max |got - ref|
  double mean_abs = 0;  // mean |got - ref|
  double ref_max = 0;   // max |ref|
};

inline Error Measure(const torch::Tensor& got, const torch::Tensor& ref) {
  const torch::Tensor g = got.detach().to(torch::kFloat64);
  const torch::Tensor r = ref.detach().to(torch::kFloat64);
  const torch::Tensor diff = (g - r).abs();
  return {diff.max().item<double>(), diff.mean().item<double>(), r.abs().max().item<double>()};
}

inline std::string Describe(const std::string& what, const torch::Tensor& t, const Error& e) {
  std::ostringstream out;
  out << what << " " << t.sizes() << " " << t.scalar_type() << ": max abs error " << e.max_abs
      << ", mean abs error " << e.mean_abs << ", max |reference| " << e.ref_max << ", relative "
      << (e.ref_max > 0 ? e.max_abs / e.ref_max : e.max_abs);
  return out.str();
}

// fp32 rule.
inline ::testing::AssertionResult NearAten(const std::string& what, const torch::Tensor& fused,
                                           const torch::Tensor& aten) {
  if (!fused.sizes().equals(aten.sizes())) {
    return ::testing::AssertionFailure()
           << what << ": shape " << fused.sizes() << " vs ATen's " << aten.sizes();
  }
  const Error e = Measure(fused, aten);
  if (e.max_abs <= kFp32Relative * e.ref_max) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << Describe(what + " fused vs ATen", fused, e) << " > " << kFp32Relative;
}

// bf16/fp16 rule: `exact` is the fp64 result.
inline ::testing::AssertionResult WithinAtenError(const std::string& what,
                                                  const torch::Tensor& fused,
                                                  const torch::Tensor& aten,
                                                  const torch::Tensor& exact) {
  if (!fused.sizes().equals(exact.sizes()) || !aten.sizes().equals(exact.sizes())) {
    return ::testing::AssertionFailure() << what << ": shapes fused " << fused.sizes() << ", ATen "
                                         << aten.sizes() << ", exact " << exact.sizes();
  }
  const Error f = Measure(fused, exact);
  const Error a = Measure(aten, exact);
  const double floor = 1e-6 * a.ref_max;
  if (f.max_abs <= kLowPrecisionSlack * a.max_abs + floor &&
      f.mean_abs <= kLowPrecisionSlack * a.mean_abs + floor) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << Describe(what + " fused vs exact", fused, f) << "; "
                                       << Describe("ATen vs exact", aten, a) << "; allowed "
                                       << kLowPrecisionSlack << "x ATen's error";
}

// Compares by the rule of `fused`'s dtype.
inline ::testing::AssertionResult Accept(const std::string& what, const torch::Tensor& fused,
                                         const torch::Tensor& aten, const torch::Tensor& exact) {
  return fused.scalar_type() == torch::kFloat32 ? NearAten(what, fused, aten)
                                                : WithinAtenError(what, fused, aten, exact);
}

// Accept() for each named result: fused[i] against aten[i] and exact[i].
inline void ExpectAccepted(const std::vector<std::string>& names,
                           const std::vector<torch::Tensor>& fused,
                           const std::vector<torch::Tensor>& aten,
                           const std::vector<torch::Tensor>& exact) {
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_TRUE(Accept(names[i], fused.at(i), aten.at(i), exact.at(i)));
}

// NearAten() for each named result.
inline void ExpectNearAten(const std::vector<std::string>& names,
                           const std::vector<torch::Tensor>& fused,
                           const std::vector<torch::Tensor>& aten) {
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_TRUE(NearAten(names[i], fused.at(i), aten.at(i)));
}

// N(0, std) on the GPU in `dtype`, from a fixed seed, and the same values in fp64.
struct Input {
  torch::Tensor low;    // dtype
  torch::Tensor exact;  // fp64 copy of `low`'s values
};

inline Input RandomInput(torch::IntArrayRef shape, torch::ScalarType dtype, uint64_t seed,
                         double std = 1.0, double mean = 0.0) {
  torch::manual_seed(seed);
  torch::Tensor values =
      torch::randn(shape, torch::TensorOptions().dtype(torch::kFloat32)) * std + mean;
  torch::Tensor low = values.to(torch::kCUDA).to(dtype);
  return {low, low.to(torch::kFloat64)};
}

// A leaf that requires grad, for backward.
inline torch::Tensor Leaf(const torch::Tensor& t) {
  return t.detach().clone().requires_grad_(true);
}

}  // namespace vramlab::kernels::testing

#endif  // VRAMLAB_KERNELS_KERNEL_TEST_UTIL_H_
