// The caching allocator's settings travel in the environment (PYTORCH_CUDA_ALLOC_CONF, and
// PYTORCH_ALLOC_CONF on newer LibTorch), which CUDA reads once when it starts. The daemon sets
// them before it starts a worker; a standalone worker whose spec asks for settings re-executes
// itself with them set (see main.cc).
#ifndef VRAMLAB_WORKER_MEMORY_ALLOCATOR_ENV_H_
#define VRAMLAB_WORKER_MEMORY_ALLOCATOR_ENV_H_

#include <string>

#include "common/spec/allocator_conf.h"

namespace vramlab::worker {

// True when either environment variable is set (even to something else: the daemon's choice wins).
bool AllocatorEnvPresent();

// Sets both variables to `conf` in this process's environment.
void SetAllocatorEnv(const std::string& conf);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_MEMORY_ALLOCATOR_ENV_H_
