// How many intra-op threads (OMP_NUM_THREADS) the daemon gives each worker process, when its own
// environment sets none (docs/DAEMON.md, "Worker processes"):
//
//  - the process's share of the host's cores: cores / sharers, at least 1, where the sharers are
//    the CPU slots on the CPU device (every experiment's rank is one slot, and the slots share the
//    cores) and the experiment's ranks on CUDA (one process per GPU, as torchrun does);
//  - a one-process CUDA run is left to LibTorch's default (nothing is set), with the optimizer
//    offloaded to the CPU too: the host loops take their work in small tasks (host_thread_pool.h),
//    so they no longer need a core left to the training's threads, and on 16-core H200 hosts the
//    offloaded step measured fastest with all 16 threads in 5 of 6 comparisons against 15
//    (docs/BENCHMARKS.md, "Write-backs during backward").
#ifndef VRAMLAB_SERVER_ENGINE_WORKER_THREADS_H_
#define VRAMLAB_SERVER_ENGINE_WORKER_THREADS_H_

#include <optional>

#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// `cores`: the host's (0 counts as 1); `cpu_slots`: the daemon's slots on the CPU device.
// nullopt when the worker keeps LibTorch's default.
std::optional<int> IntraOpThreads(unsigned cores, vramlab::v1::DeviceKind device, int cpu_slots,
                                  const vramlab::v1::ExperimentSpec& spec);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_WORKER_THREADS_H_
