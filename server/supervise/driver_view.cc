#include "server/supervise/driver_view.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vramlab::server {

using vramlab::v1::FinalReport;
using vramlab::v1::WorkerEvent;

namespace {

std::string FormatBytes(int64_t bytes) { return absl::StrFormat("%.2f GiB", bytes / 1073741824.0); }

}  // namespace

DriverView::DriverView(GpuMemoryReader* reader, std::string gpu_uuid, std::string gpu_name,
                       std::chrono::milliseconds interval, Clock::time_point started)
    : reader_(reader),
      gpu_uuid_(std::move(gpu_uuid)),
      gpu_name_(std::move(gpu_name)),
      interval_(std::max(interval, kDriverViewMinInterval)),
      started_(started) {}

std::optional<WorkerEvent> DriverView::Sample(Clock::time_point now,
                                              const Membership& is_job_process) {
  if (probe_spoke_ || closed_) return std::nullopt;
  if (next_.has_value() && now < *next_) return std::nullopt;
  // The next reading is due an interval after this one was due; a loop that came later than
  // that starts the count again from now rather than catch up in a burst.
  const Clock::time_point after = next_.value_or(now) + interval_;
  next_ = after > now ? after : now + interval_;
  absl::StatusOr<GpuMemoryReading> reading = reader_->Read(gpu_uuid_);
  if (!reading.ok()) {
    if (read_error_.empty()) read_error_ = std::string(reading.status().message());
    return std::nullopt;
  }
  int64_t job_bytes = 0;
  for (const GpuProcessMemory& process : reading->processes) {
    if (!is_job_process(process.pid)) continue;
    job_process_listed_ = true;
    if (process.used_bytes < 0) {
      job_bytes_unknown_ = true;
    } else {
      job_bytes += process.used_bytes;
    }
  }
  if (readings_ == 0) first_device_used_ = reading->used_bytes;
  ++readings_;
  peak_job_bytes_ = std::max(peak_job_bytes_, job_bytes);
  peak_device_used_ = std::max(peak_device_used_, reading->used_bytes);

  WorkerEvent event;
  vramlab::v1::MemorySample& sample = *event.mutable_sample();
  sample.set_time_seconds(std::chrono::duration<double>(now - started_).count());
  sample.set_allocated_bytes(job_bytes);
  sample.set_reserved_bytes(job_bytes);
  sample.set_active_bytes(job_bytes);
  sample.set_peak_allocated_bytes(peak_job_bytes_);
  sample.set_peak_reserved_bytes(peak_job_bytes_);
  sample.set_device_used_bytes(reading->used_bytes);
  sample.set_device_total_bytes(reading->total_bytes);
  return event;
}

std::vector<WorkerEvent> DriverView::Close(bool job_sent_report) {
  std::vector<WorkerEvent> events;
  if (closed_) return events;
  closed_ = true;
  auto notice = [&events](vramlab::v1::Notice::Level level, std::string message) {
    WorkerEvent event;
    event.mutable_notice()->set_level(level);
    event.mutable_notice()->set_message(std::move(message));
    events.push_back(std::move(event));
  };
  if (job_sent_report || probe_spoke_) return events;
  if (readings_ == 0) {
    if (!read_error_.empty()) {
      notice(vramlab::v1::Notice::WARNING,
             absl::StrCat("the program sent no report, and the GPU driver could not be read: ",
                          read_error_));
    }
    return events;
  }
  // The driver never named one of the job's processes, yet the device filled up meanwhile: its
  // pids are not the daemon's to match, so only the device as a whole can stand for the job.
  const int64_t device_rise = std::max<int64_t>(0, peak_device_used_ - first_device_used_);
  const bool by_device = !job_process_listed_ && device_rise > 0;
  FinalReport report;
  report.set_device_name(gpu_name_);
  vramlab::v1::MemoryAnatomy& anatomy = *report.mutable_anatomy();
  std::string measured;
  if (by_device) {
    report.set_measured_by(FinalReport::GPU_DRIVER_DEVICE);
    anatomy.set_peak_device_used_bytes(device_rise);
    measured = absl::StrCat(
        "the GPU driver listed none of the job's processes (its pids are not this daemon's), so "
        "peak device used is the device's use above its level at the job's first reading (",
        FormatBytes(first_device_used_), "): ", FormatBytes(device_rise),
        "; other processes on the GPU count too");
  } else {
    report.set_measured_by(FinalReport::GPU_DRIVER_PROCESSES);
    anatomy.set_peak_device_used_bytes(peak_job_bytes_);
    measured = absl::StrCat(
        "peak device used is the most the GPU driver listed for the job's "
        "processes, CUDA contexts included: ",
        FormatBytes(peak_job_bytes_));
    if (job_bytes_unknown_) {
      absl::StrAppend(&measured, "; the driver gave no byte count for some of them");
    }
  }
  notice(
      vramlab::v1::Notice::WARNING,
      absl::StrCat("no probe report (not a PyTorch program): the daemon read the GPU driver ",
                   readings_, " times, every ", interval_.count(), " ms at most; ", measured,
                   read_error_.empty() ? "" : absl::StrCat("; a reading failed: ", read_error_)));
  WorkerEvent event;
  *event.mutable_report() = std::move(report);
  events.push_back(std::move(event));
  return events;
}

}  // namespace vramlab::server
