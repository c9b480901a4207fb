// Sizes of optimizer state and update temporaries that the worker's optimizers (worker/optim/)
// allocate and the estimator (server/estimate/parameter_state.cc) predicts: one definition for
// both.
#ifndef VRAMLAB_COMMON_LAYOUT_OPTIMIZER_LAYOUT_H_
#define VRAMLAB_COMMON_LAYOUT_OPTIMIZER_LAYOUT_H_

#include <cstdint>

namespace vramlab::layout {

// 8-bit AdamW (worker/optim/blockwise_quantizer.h, adamw_8bit_rule.cc): each moment of a tensor
// with at least kAdamW8bitMinElements elements is one uint8 code per element plus one fp32 absmax
// per block of kAdamW8bitBlockElements; smaller tensors keep both moments in fp32 (bitsandbytes'
// min_8bit_size). Two code maps of kAdamW8bitMapEntries fp32 values (values and midpoints) live on
// the device.
inline constexpr int64_t kAdamW8bitBlockElements = 256;
inline constexpr int64_t kAdamW8bitMinElements = 4096;
inline constexpr int64_t kAdamW8bitMapEntries = 256;

// Whether a tensor of `n` elements keeps 8-bit moments (else fp32 ones).
inline constexpr bool AdamW8bitQuantized(int64_t n) { return n >= kAdamW8bitMinElements; }
// Blocks (one fp32 absmax each) of a moment of `n` elements.
inline constexpr int64_t AdamW8bitBlocks(int64_t n) {
  return (n + kAdamW8bitBlockElements - 1) / kAdamW8bitBlockElements;
}

// ADAMW_FP32_MASTER's fused path (worker/optim/adamw_master_rule.cc): the fp32 gradient copies of a
// group of parameters alive at once, at most this many bytes a group.
inline constexpr int64_t kMasterUpcastGroupBytes = int64_t{256} << 20;

}  // namespace vramlab::layout

#endif  // VRAMLAB_COMMON_LAYOUT_OPTIMIZER_LAYOUT_H_
