// Argument checks and conversions shared by the fused ops' wrappers.
#ifndef VRAMLAB_KERNELS_TENSOR_ARGS_H_
#define VRAMLAB_KERNELS_TENSOR_ARGS_H_

#include <torch/torch.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/kernels.h"

namespace vramlab::kernels {

// The kernels' element type of a float32, float16 or bfloat16 tensor; throws for another dtype.
cuda::ElementType ElementTypeOf(const torch::Tensor& t, const char* op);

// Throws unless `t` is a defined CUDA tensor on `device` with `dtype`.
void CheckCudaTensor(const torch::Tensor& t, const char* op, const char* name,
                     const torch::Device& device, torch::ScalarType dtype);

// The current ATen stream of `device`: the kernels run where ATen's own ops of this step run.
cudaStream_t StreamOf(const torch::Device& device);

// Throws a c10::Error naming `op` unless the launch was enqueued.
void CheckLaunch(cudaError_t status, const char* op);

}  // namespace vramlab::kernels

#endif  // VRAMLAB_KERNELS_TENSOR_ARGS_H_
