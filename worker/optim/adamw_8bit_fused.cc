#include "worker/optim/adamw_8bit_fused.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(VRAMLAB_WITH_OPTIM_KERNELS)
#include <c10/cuda/CUDAStream.h>

#include "kernels/optim/adamw_8bit_kernel.h"
#endif

namespace vramlab::worker::optim_internal {

bool FusedAdamW8bitSupports(torch::ScalarType param_dtype, torch::ScalarType grad_dtype) {
  auto supported = [](torch::ScalarType t) {
    return t == torch::kFloat || t == torch::kBFloat16 || t == torch::kHalf;
  };
  return supported(param_dtype) && supported(grad_dtype);
}

#if defined(VRAMLAB_WITH_OPTIM_KERNELS)

namespace {

static_assert(kQuantBlockSize == kernels::kAdamW8bitBlock,
              "the kernel's block is the quantizer's block");

kernels::FloatKind KindOf(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kBFloat16:
      return kernels::FloatKind::kBFloat16;
    case torch::kHalf:
      return kernels::FloatKind::kFloat16;
    case torch::kFloat:
      return kernels::FloatKind::kFloat32;
    default:
      throw std::invalid_argument("fused 8-bit AdamW: unsupported dtype");
  }
}

// The table on the device: copied from pinned memory without blocking the host (the caching host
// allocator keeps the pinned block until the copy has run).
torch::Tensor DeviceTable(const std::vector<kernels::AdamW8bitTensor>& table,
                          const torch::Device& device) {
  const int64_t bytes = static_cast<int64_t>(table.size() * sizeof(kernels::AdamW8bitTensor));
  torch::Tensor host =
      torch::empty({bytes}, torch::TensorOptions().dtype(torch::kByte).pinned_memory(true));
  std::memcpy(host.data_ptr(), table.data(), static_cast<size_t>(bytes));
  return host.to(device, /*non_blocking=*/true);
}

}  // namespace

bool HasFusedAdamW8bit(const torch::Device& device) { return device.is_cuda(); }

void FusedAdamW8bit(const std::vector<FusedAdamW8bitTensor>& tensors,
                    const QuantizationMap& signed_map, const QuantizationMap& unsigned_map,
                    const AdamWHyper& hyper, int64_t step) {
  if (tensors.empty()) return;
  const torch::Device device = tensors[0].param.device();
  std::vector<kernels::AdamW8bitTensor> table;
  table.reserve(tensors.size());
  int64_t total_blocks = 0;
  for (const FusedAdamW8bitTensor& t : tensors) {
    const int64_t n = t.param.numel();
    if (n == 0) continue;
    kernels::AdamW8bitTensor entry;
    entry.param = t.param.data_ptr();
    entry.grad = t.grad.data_ptr();
    entry.exp_avg = t.exp_avg.data_ptr();
    entry.exp_avg_sq = t.exp_avg_sq.data_ptr();
    if (t.exp_avg_absmax.defined()) {
      entry.exp_avg_absmax = t.exp_avg_absmax.data_ptr<float>();
      entry.exp_avg_sq_absmax = t.exp_avg_sq_absmax.data_ptr<float>();
    }
    entry.numel = n;
    entry.first_block = total_blocks;
    entry.param_kind = KindOf(t.param);
    entry.grad_kind = KindOf(t.grad);
    table.push_back(entry);
    total_blocks += NumQuantBlocks(n);
  }
  if (table.empty()) return;
  const torch::Tensor device_table = DeviceTable(table, device);
  const AdamWFloatScalars s = FloatScalarsAt(hyper, step);
  // ATen's CUDA div_ by a scalar multiplies by the reciprocal, taken in double (PyTorch 2.x).
  const float inv_sqrt_bias_correction2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(hyper.beta2, static_cast<double>(step))));
  const kernels::AdamWScalars scalars{
      s.decay, s.lerp_weight,  s.beta2, s.one_minus_beta2, inv_sqrt_bias_correction2,
      s.eps,   s.neg_step_size};
  const kernels::DynamicMaps maps{
      signed_map.values().data_ptr<float>(), signed_map.midpoints().data_ptr<float>(),
      unsigned_map.values().data_ptr<float>(), unsigned_map.midpoints().data_ptr<float>()};
  kernels::LaunchAdamW8bit(static_cast<const kernels::AdamW8bitTensor*>(device_table.data_ptr()),
                           static_cast<int32_t>(table.size()), total_blocks, maps, scalars,
                           c10::cuda::getCurrentCUDAStream(device.index()).stream());
}

#else  // !VRAMLAB_WITH_OPTIM_KERNELS

bool HasFusedAdamW8bit(const torch::Device& /*device*/) { return false; }

void FusedAdamW8bit(const std::vector<FusedAdamW8bitTensor>& /*tensors*/,
                    const QuantizationMap& /*signed_map*/, const QuantizationMap& /*unsigned_map*/,
                    const AdamWHyper& /*hyper*/, int64_t /*step*/) {
  throw std::logic_error("FusedAdamW8bit called in a build without kernels/optim");
}

#endif  // VRAMLAB_WITH_OPTIM_KERNELS

}  // namespace vramlab::worker::optim_internal
