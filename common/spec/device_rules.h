// What needs a CUDA device: the fused kernels (training.kernels FUSED) and FLOAT16 matrix
// products, with the words each refusal uses. Dependency-free.
#ifndef VRAMLAB_COMMON_SPEC_DEVICE_RULES_H_
#define VRAMLAB_COMMON_SPEC_DEVICE_RULES_H_

namespace vramlab::spec_rules {

// training.kernels FUSED runs the CUDA kernels of kernels/ (docs/KERNELS.md): a CUDA device and a
// worker built with them. The daemon and the worker refuse it elsewhere with these words.
inline constexpr const char* kKernelsField = "training.kernels";
inline constexpr const char* kFusedKernelsNeedCudaMessage =
    "FUSED runs CUDA kernels and needs a CUDA device; use ATEN on the CPU";
inline constexpr const char* kFusedKernelsNotBuiltMessage =
    "FUSED needs a worker built with the CUDA kernels (CMake VRAMLAB_CUDA_KERNELS, a CUDA toolkit "
    "and a LibTorch with CUDA); use ATEN";

// FLOAT16 matrix products have no CPU kernels in LibTorch's CPU builds ("addmm_impl_cpu_" not
// implemented for 'Half'); the daemon and the worker refuse it on the CPU with these words.
inline constexpr const char* kDtypeField = "training.dtype";
inline constexpr const char* kFloat16NeedsCudaMessage =
    "FLOAT16 needs a CUDA device; use FLOAT32 or BFLOAT16 on the CPU";

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_DEVICE_RULES_H_
