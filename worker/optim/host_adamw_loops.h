// The one-pass AdamW loops over raw host arrays behind host_adamw.h, free of LibTorch so that they
// compile on their own with -O3 -fno-math-errno (worker/CMakeLists.txt): each is the update of
// AdamWUpdate (adamw_math.h) in fp32 for elements [begin, end), exactly as the fp32 ATen ops
// round; bf16 values are upcast, updated in fp32 and rounded once per stored tensor, as a fused
// AdamW kernel does (not after every op, as the bf16 ATen ops do). bf16 arrays are raw 16-bit
// words. Callers split the range across threads.
#ifndef VRAMLAB_WORKER_OPTIM_HOST_ADAMW_LOOPS_H_
#define VRAMLAB_WORKER_OPTIM_HOST_ADAMW_LOOPS_H_

#include <cstdint>

#include "worker/optim/adamw_float_scalars.h"

namespace vramlab::worker::optim_internal {

void UpdateRangeFp32(const AdamWFloatScalars& c, float* p, const float* g, float* m, float* v,
                     int64_t begin, int64_t end);
void UpdateRangeBf16(const AdamWFloatScalars& c, uint16_t* p, const uint16_t* g, uint16_t* m,
                     uint16_t* v, int64_t begin, int64_t end);
// fp32 master and moments; the gradient comes in, and the parameter goes out, as fp32 or bf16.
void UpdateMasterRangeFp32(const AdamWFloatScalars& c, float* master, const float* g, float* m,
                           float* v, float* param, int64_t begin, int64_t end);
void UpdateMasterRangeBf16(const AdamWFloatScalars& c, float* master, const uint16_t* g, float* m,
                           float* v, uint16_t* param, int64_t begin, int64_t end);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_HOST_ADAMW_LOOPS_H_
