// A worker on the CPU device caps its own data segment (RLIMIT_DATA: heap and private anonymous
// mappings) at what the daemon says the host can give it, so a spec that needs more than the host
// has ends as an out-of-memory answer of its own instead of pushing the host into swap or the
// kernel's OOM killer. The daemon passes the cap in VRAMLAB_HOST_MEMORY_LIMIT_BYTES (host RAM less
// a margin). CUDA runs are left alone: the CUDA driver reserves large private mappings that such a
// limit would break, and their device memory is capped by the caching allocator instead.
#ifndef VRAMLAB_WORKER_MEMORY_HOST_MEMORY_LIMIT_H_
#define VRAMLAB_WORKER_MEMORY_HOST_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

namespace vramlab::worker {

// The cap from the environment variable; 0 when unset or not a positive number.
int64_t HostMemoryLimitFromEnvironment();

// Sets RLIMIT_DATA to `bytes` (never raising an existing lower limit). Returns false, with the
// reason in `error`, when the kernel refuses.
bool LimitDataSegment(int64_t bytes, std::string* error);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_HOST_MEMORY_LIMIT_H_
