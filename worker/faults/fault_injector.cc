#include "worker/faults/fault_injector.h"

#include <csignal>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace vramlab::worker {

void InjectFault(Fault fault, EventSink& sink, MemoryMonitor& monitor) {
  switch (fault) {
    case Fault::kUnspecified:
      return;
    case Fault::kSegfault:
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
      std::_Exit(139);  // not reached
    case Fault::kAbort:
      std::abort();
    case Fault::kHang:
      for (;;) pause();  // alive and silent until a signal kills it
    case Fault::kExitMidStream:
      // _exit: no destructors, no report, as if the process had been cut off mid-run.
      _exit(0);
    case Fault::kFloodOutput:
      while (sink.healthy()) sink.Sample(monitor.Read());
      _exit(1);
    case Fault::kInvalidJson:
      sink.WriteRawLine("{\"sample\": this line is not JSON");
      return;
    case Fault::kHugeLine: {
      // Valid JSON (a notice), only far too long.
      const std::string message(kHugeLineBytes, 'x');
      sink.Notice(NoticeLevel::kInfo, message);
      return;
    }
  }
}

}  // namespace vramlab::worker
