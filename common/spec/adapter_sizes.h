// Storage sizes of adapter training, shared by the worker (which allocates them) and the
// estimator (which predicts them): LoRA's adapter elements and QLoRA's NF4 bytes.
//
// NF4 (QLoRA, Dettmers et al. 2023; bitsandbytes' quant_type="nf4", compress_statistics=True):
// a weight of N elements is cut into blocks of 64; each element is a 4-bit index into the
// 16-value NormalFloat codebook (two per byte), each block has an absmax. The absmax values are
// double-quantised: their mean is subtracted (one host-side float) and the rest is stored as
// 8-bit dynamic codes in blocks of 256, with one fp32 scale per block. Per tensor:
//   codes:     ceil(N / 2) bytes
//   constants: ceil(N / 64) bytes (absmax codes) + 4 * ceil(ceil(N / 64) / 256) bytes (scales)
// i.e. 4.127 bits per element for large N, as the paper states.
#ifndef VRAMLAB_COMMON_SPEC_ADAPTER_SIZES_H_
#define VRAMLAB_COMMON_SPEC_ADAPTER_SIZES_H_

#include <cstdint>

namespace vramlab::spec_rules {

inline constexpr int64_t kNf4BlockSize = 64;
inline constexpr int64_t kNf4AbsmaxBlockSize = 256;

inline constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline constexpr int64_t Nf4CodeBytes(int64_t numel) { return CeilDiv(numel, 2); }

inline constexpr int64_t Nf4ConstantBytes(int64_t numel) {
  const int64_t blocks = CeilDiv(numel, kNf4BlockSize);
  return blocks + 4 * CeilDiv(blocks, kNf4AbsmaxBlockSize);
}

// Elements of one LoRA pair (A: rank x in, B: out x rank) on an in -> out projection.
inline constexpr int64_t LoraElements(int64_t rank, int64_t in_features, int64_t out_features) {
  return rank * (in_features + out_features);
}

}  // namespace vramlab::spec_rules

#endif  // VRAMLAB_COMMON_SPEC_ADAPTER_SIZES_H_
