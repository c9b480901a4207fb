#include "kernels/tensor_args.h"

#include <c10/cuda/CUDAStream.h>

namespace vramlab::kernels {

cuda::ElementType ElementTypeOf(const torch::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case torch::kFloat32:
      return cuda::ElementType::kFloat32;
    case torch::kFloat16:
      return cuda::ElementType::kFloat16;
    case torch::kBFloat16:
      return cuda::ElementType::kBFloat16;
    default:
      TORCH_CHECK(false, op, ": dtype must be float32, float16 or bfloat16, got ", t.scalar_type());
  }
}

void CheckCudaTensor(const torch::Tensor& t, const char* op, const char* name,
                     const torch::Device& device, torch::ScalarType dtype) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is undefined");
  TORCH_CHECK(t.device() == device, op, ": ", name, " is on ", t.device(), ", expected ", device);
  TORCH_CHECK(t.scalar_type() == dtype, op, ": ", name, " has dtype ", t.scalar_type(),
              ", expected ", dtype);
}

cudaStream_t StreamOf(const torch::Device& device) {
  return c10::cuda::getCurrentCUDAStream(device.index()).stream();
}

void CheckLaunch(cudaError_t status, const char* op) {
  TORCH_CHECK(status == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(status));
}

}  // namespace vramlab::kernels
