// Test-only faults (ExperimentSpec.fault), injected right after the first sample was written so
// that the daemon sees a worker that started properly and then misbehaves. The daemon accepts a
// spec with a fault only with --enable-fault-injection.
#ifndef VRAMLAB_WORKER_FAULTS_FAULT_INJECTOR_H_
#define VRAMLAB_WORKER_FAULTS_FAULT_INJECTOR_H_

#include <cstddef>

#include "worker/events/event_sink.h"
#include "worker/memory/memory_monitor.h"
#include "worker/spec/experiment_spec.h"

namespace vramlab::worker {

// Bytes in the HUGE_LINE line: far above any sane event, so a reader must bound its line buffer.
inline constexpr size_t kHugeLineBytes = 16u << 20;

// Performs `fault`. SEGFAULT, ABORT, HANG, EXIT_MID_STREAM and FLOOD_OUTPUT never return
// (FLOOD_OUTPUT exits once its reader is gone). INVALID_JSON and HUGE_LINE write their line and
// return, and the run continues normally. kNone returns at once.
void InjectFault(Fault fault, EventSink& sink, MemoryMonitor& monitor);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_FAULTS_FAULT_INJECTOR_H_
