// Block-wise dynamic 8-bit quantization, the scheme of bitsandbytes' 8-bit optimizers: a flat
// tensor is cut into blocks of kQuantBlockSize elements; each block stores its absolute maximum
// (fp32) and one uint8 code per element, the index of the nearest entry of a non-linear "dynamic"
// map of 256 values in [-1, 1] (signed, for the first moment) or [0, 1] (unsigned, for the second
// moment). The map spaces its entries by decades (1e-6 .. 1), so small values keep a relative
// precision that a linear 8-bit grid would lose.
#ifndef VRAMLAB_WORKER_OPTIM_BLOCKWISE_QUANTIZER_H_
#define VRAMLAB_WORKER_OPTIM_BLOCKWISE_QUANTIZER_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "common/layout/optimizer_layout.h"

namespace vramlab::worker::optim_internal {

constexpr int64_t kQuantBlockSize = layout::kAdamW8bitBlockElements;

// The 256 values of bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7, total_bits=8),
// sorted ascending.
std::vector<float> DynamicMapValues(bool is_signed);

// A dynamic map on one device, ready for encoding (midpoints between neighbours) and decoding.
class QuantizationMap {
 public:
  QuantizationMap(bool is_signed, const torch::Device& device);
  const torch::Tensor& values() const { return values_; }
  const torch::Tensor& midpoints() const { return midpoints_; }

 private:
  torch::Tensor values_;     // float32 [256]
  torch::Tensor midpoints_;  // float32 [255]
};

// Number of scales for `numel` elements.
inline int64_t NumQuantBlocks(int64_t numel) {
  return (numel + kQuantBlockSize - 1) / kQuantBlockSize;
}

// Encodes float32 `values` (1-D, its first element at a block boundary) into `codes` (uint8, same
// length) and `absmax` (float32, NumQuantBlocks(values.numel())), all on map's device.
void QuantizeBlockwise(const torch::Tensor& values, const QuantizationMap& map,
                       const torch::Tensor& codes, const torch::Tensor& absmax);

// Decodes `codes` with the block scales `absmax` into a new float32 tensor.
torch::Tensor DequantizeBlockwise(const torch::Tensor& codes, const torch::Tensor& absmax,
                                  const QuantizationMap& map);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_BLOCKWISE_QUANTIZER_H_
