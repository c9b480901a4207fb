// Persistent std::threads for the host AdamW loops (host_adamw.cc). The offloaded step calls the
// loop once per chunk of at most 16 Mi elements, hundreds of times per step; starting and joining
// up to one thread per core on each call cost more than the loop itself on small chunks. Not
// OpenMP: LibTorch's OpenMP regions hung in libgomp on the GPU host once the host step ran inside
// them (host_stepper.cc).
#ifndef VRAMLAB_WORKER_OPTIM_HOST_THREAD_POOL_H_
#define VRAMLAB_WORKER_OPTIM_HOST_THREAD_POOL_H_

#include <functional>

namespace vramlab::worker::optim_internal {

// Runs task(0) ... task(tasks - 1) on at most `workers` threads at once: the calling thread and
// workers - 1 pool threads (started on first need, kept until the process exits), each taking the
// next task not yet taken until none is left; returns when all have finished. Tasks are handed out
// dynamically, so a thread that loses its core to another process's or the training's thread takes
// fewer tasks instead of holding every other thread at the end (split the work into several times
// `workers` tasks for that to help). Calls from several threads are served one after another.
// `task` must not throw.
void RunOnHostThreads(int workers, int tasks, const std::function<void(int)>& task);

}  // namespace vramlab::worker::optim_internal

#endif  // VRAMLAB_WORKER_OPTIM_HOST_THREAD_POOL_H_
