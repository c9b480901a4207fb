// The daemon's own readings of a command job on a GPU (docs/COMMANDS.md, "The driver's view"): a
// program whose probe says nothing — one that is not Python, or Python before it imports torch —
// still gets memory samples and a final report, from what the driver says the job's processes
// hold on the job's GPU.
//
// While the job's events pipe has carried nothing, each reading becomes a MemorySample:
// allocated = reserved = the bytes the driver lists for the job's own processes (CUDA contexts
// included; there is no caching allocator to ask), device_used = the device's total - free (every
// process, as the worker's driver view). The first event from the job means its probe is running:
// the readings stop, and the probe's numbers are the job's.
//
// At the end, when the job sent no final report, the readings become one: peak device used is the
// job's processes' peak (FinalReport.measured_by GPU_DRIVER_PROCESSES). Where the driver named
// none of the job's processes while the device's use rose (a daemon in a pid namespace of its own
// sees other pids than the driver lists), the report falls back to the device's use above what it
// was at the job's first reading, which counts any other process too (GPU_DRIVER_DEVICE), and says
// so in a notice.
//
// Owned and used by one thread (the supervisor's).
#ifndef VRAMLAB_SERVER_SUPERVISE_DRIVER_VIEW_H_
#define VRAMLAB_SERVER_SUPERVISE_DRIVER_VIEW_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/supervise/gpu_memory_reader.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// The most often the daemon reads the driver for one job, whatever the spec's interval asks: each
// reading lists the device's processes, on the thread that also serves every worker's pipes.
inline constexpr std::chrono::milliseconds kDriverViewMinInterval{50};

class DriverView {
 public:
  using Clock = std::chrono::steady_clock;
  // Whether `pid` (in the daemon's pid namespace) is one of the job's processes.
  using Membership = std::function<bool(pid_t)>;

  // `reader` outlives this. `interval` is the spec's sample interval, raised to
  // kDriverViewMinInterval. `started` is the job's start: samples count their time from it.
  DriverView(GpuMemoryReader* reader, std::string gpu_uuid, std::string gpu_name,
             std::chrono::milliseconds interval, Clock::time_point started);

  // The job's pipe carried an event: its probe reports from now on; no more readings.
  void ProbeSpoke() { probe_spoke_ = true; }
  bool probe_spoke() const { return probe_spoke_; }

  // A reading when one is due (none after ProbeSpoke or Close): a `sample` event, or nothing when
  // it is not yet time. A failed read is kept for the closing notice and yields nothing.
  std::optional<vramlab::v1::WorkerEvent> Sample(Clock::time_point now,
                                                 const Membership& is_job_process);

  // Once, when the job has ended and its pipe is drained. With no final report from the job
  // (`job_sent_report` false) and at least one reading: a `notice` saying what was measured and
  // the `report`. Otherwise a notice only when reading failed, or nothing.
  std::vector<vramlab::v1::WorkerEvent> Close(bool job_sent_report);

 private:
  GpuMemoryReader* const reader_;
  const std::string gpu_uuid_;
  const std::string gpu_name_;
  const std::chrono::milliseconds interval_;
  const Clock::time_point started_;
  std::optional<Clock::time_point> next_;
  bool probe_spoke_ = false;
  bool closed_ = false;
  int readings_ = 0;
  // The first failure of a read, for the closing notice.
  std::string read_error_;
  // The job's processes, as listed by the driver: the highest sum seen, and whether any listed
  // process had no byte count.
  int64_t peak_job_bytes_ = 0;
  bool job_process_listed_ = false;
  bool job_bytes_unknown_ = false;
  // The device's use at the first reading, and its highest.
  int64_t first_device_used_ = 0;
  int64_t peak_device_used_ = 0;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_DRIVER_VIEW_H_
