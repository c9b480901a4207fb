// Recognizing out-of-memory failures among the exceptions a training step can throw.
#ifndef VRAMLAB_WORKER_MEMORY_OOM_H_
#define VRAMLAB_WORKER_MEMORY_OOM_H_

#include <cstdint>
#include <exception>
#include <string>

namespace vramlab::worker {

// c10::OutOfMemoryError (CUDA caching allocator, counting CPU allocator), std::bad_alloc, ATen's
// CPU allocator refusing ("can't allocate memory", e.g. under the worker's data-segment cap), and
// CUDA errors that mean "out of memory" raised outside the allocator (cuBLAS/cuDNN workspaces).
bool IsOutOfMemory(const std::exception& e);

// The request size in an allocator message: "Tried to allocate 60.00 GiB" (rounded, as the CUDA
// allocator prints it), "Tried to allocate 4096 bytes" (exact, the counting allocator) or "you
// tried to allocate 4096 bytes" (ATen's CPU allocator). 0 if the message names none.
int64_t RequestedBytesFromMessage(const std::string& message);

// The message without LibTorch's C++ backtrace ("Exception raised from ... frame #0 ...").
std::string FirstLinesOfError(const std::string& what);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_OOM_H_
