// NF4 storage of a frozen weight (QLoRA; bitsandbytes' Params4bit with quant_type="nf4" and
// compress_statistics=True). Sizes and layout: common/spec/adapter_sizes.h.
//
// Quantisation: the weight, flattened in row-major order (zero-padded to a whole block), is cut
// into blocks of 64; each element becomes the index of the nearest NormalFloat value to
// element / absmax(block) (ties to the lower index), packed two per byte with the first element
// in the high nibble, as bitsandbytes packs them. The block absmax values (fp32) are then
// double-quantised: offset = mean(absmax) is kept aside and absmax - offset is stored with the
// 8-bit signed dynamic map in blocks of 256 (worker/optim/blockwise_quantizer.h, the map
// bitsandbytes uses for it).
//
// Dequantisation: absmax = dynamic-decode(codes, scales) + offset; weight = codebook[index] *
// absmax, computed in the compute dtype (one lookup table of the 256 byte values' two entries).
#ifndef VRAMLAB_WORKER_ADAPTERS_NF4_H_
#define VRAMLAB_WORKER_ADAPTERS_NF4_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "worker/optim/blockwise_quantizer.h"

namespace vramlab::worker {

// The 16 NormalFloat values of the QLoRA paper (appendix E), as bitsandbytes' NF4 table, sorted.
const std::array<float, 16>& Nf4Codebook();

// The lookup tables the NF4 tensors of one model share, on their device: the two codebook
// values of each byte ([256, 2] in the compute dtype) and the 8-bit map of the absmax codes
// (values and midpoints, fp32). Part of the quantisation constants; freed with the model.
class Nf4Tables {
 public:
  Nf4Tables(torch::Dtype compute_dtype, const torch::Device& device);

  torch::Dtype compute_dtype() const { return pair_table_.scalar_type(); }
  const torch::Tensor& pair_table() const { return pair_table_; }
  const optim_internal::QuantizationMap& absmax_map() const { return absmax_map_; }
  int64_t bytes() const {
    return pair_table_.nbytes() + absmax_map_.values().nbytes() + absmax_map_.midpoints().nbytes();
  }

 private:
  torch::Tensor pair_table_;
  optim_internal::QuantizationMap absmax_map_;
};

struct Nf4Tensor {
  std::vector<int64_t> shape;
  int64_t numel = 0;
  torch::Tensor codes;          // uint8 [ceil(numel / 2)]
  torch::Tensor absmax_codes;   // uint8 [ceil(numel / 64)]
  torch::Tensor absmax_scales;  // float32 [ceil(ceil(numel / 64) / 256)]
  double absmax_offset = 0;     // host-side
  std::shared_ptr<const Nf4Tables> tables;

  int64_t code_bytes() const { return codes.nbytes(); }
  int64_t constant_bytes() const { return absmax_codes.nbytes() + absmax_scales.nbytes(); }
};

// Quantises `weight` (any floating dtype) on the tables' device. Works through the weight a
// bounded number of blocks at a time, so the temporaries stay small next to the weight.
Nf4Tensor QuantizeNf4(const torch::Tensor& weight, std::shared_ptr<const Nf4Tables> tables);

// The block absmax values, decoded (float32 [ceil(numel / 64)]).
torch::Tensor Nf4Absmax(const Nf4Tensor& q);

// The weight in the tables' compute dtype, shaped as it was, on the codes' device.
torch::Tensor DequantizeNf4(const Nf4Tensor& q);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_ADAPTERS_NF4_H_
