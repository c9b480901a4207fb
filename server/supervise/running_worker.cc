#include "server/supervise/running_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <thread>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/supervise/tagged_processes.h"

namespace vramlab::server {
namespace {

// Per pump and pipe: keeps one chatty worker from starving the others in the poll loop.
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kReadsPerPump = 4;
// After the process is reaped, how long pipes held open by its leftovers are still drained.
constexpr std::chrono::seconds kDrainAfterExit{2};
// After the reap, how often a command's tagged processes are looked for again while some remain.
constexpr std::chrono::milliseconds kLeftoverScanInterval{20};

}  // namespace

RunningWorker::RunningWorker(std::string experiment_id, SpawnedProcess process,
                             const std::string& log_path, int time_limit_seconds,
                             const WorkerLimits& limits, SteadyTime now,
                             std::optional<SteadyTime> deadline)
    : experiment_id_(std::move(experiment_id)),
      process_(process),
      limits_(limits),
      lines_(limits.max_event_line_bytes),
      deadline_(deadline.value_or(now + std::chrono::seconds(time_limit_seconds))),
      window_start_(now) {
  facts_.time_limit_seconds = time_limit_seconds;
  log_file_fd_ = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

RunningWorker::~RunningWorker() {
  CloseEvents();
  CloseLog();
  if (log_file_fd_ >= 0) close(log_file_fd_);
}

void RunningWorker::CloseEvents() {
  if (process_.events_fd >= 0) close(process_.events_fd);
  process_.events_fd = -1;
}

void RunningWorker::CloseLog() {
  if (process_.log_fd >= 0) close(process_.log_fd);
  process_.log_fd = -1;
}

void RunningWorker::MarkCommand(uid_t uid, std::string process_tag,
                                std::unique_ptr<JobCgroup> cgroup,
                                const std::string& no_cgroup_reason) {
  facts_.command = true;
  command_uid_ = uid;
  process_tag_ = std::move(process_tag);
  cgroup_ = std::move(cgroup);
  if (cgroup_ == nullptr && !no_cgroup_reason.empty() && log_file_fd_ >= 0) {
    const std::string note = absl::StrCat("[vramlabd: no cgroup for this job (", no_cgroup_reason,
                                          "); the processes it starts are found by their tag]\n");
    (void)!write(log_file_fd_, note.data(), note.size());
  }
}

void RunningWorker::AttachDriverView(std::unique_ptr<DriverView> view,
                                     std::function<void(vramlab::v1::WorkerEvent)> emit) {
  driver_view_ = std::move(view);
  emit_driver_view_ = std::move(emit);
}

void RunningWorker::SampleDriverView(SteadyTime now) {
  if (driver_view_ == nullptr || reaped_) return;
  std::optional<vramlab::v1::WorkerEvent> sample =
      driver_view_->Sample(now, [this](pid_t pid) { return IsJobProcess(pid); });
  if (sample.has_value()) emit_driver_view_(*std::move(sample));
}

void RunningWorker::CloseDriverView() {
  if (driver_view_ == nullptr) return;
  for (vramlab::v1::WorkerEvent& event : driver_view_->Close(facts_.saw_final_report)) {
    emit_driver_view_(std::move(event));
  }
  driver_view_.reset();
}

bool RunningWorker::IsJobProcess(pid_t pid) const {
  if (pid <= 0) return false;
  if (cgroup_ != nullptr) return cgroup_->Holds(pid);
  if (pid == process_.pid || getpgid(pid) == process_.pid) return true;
  if (!tagged()) return false;
  std::ifstream environ(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(environ)),
                          std::istreambuf_iterator<char>());
  return EnvironHolds(image, process_tag_);
}

void RunningWorker::SignalGroup(int signal) {
  // The group outlives a reaped leader only through leftovers, which die with it too.
  kill(-process_.pid, signal);
  // The cgroup holds every tagged process too (the command user cannot leave it): a /proc scan
  // is needed only without one.
  if (cgroup_ != nullptr) {
    cgroup_->Signal(signal);
  } else if (tagged()) {
    SignalTaggedProcesses(command_uid_, process_tag_, signal);
  }
}

void RunningWorker::Violation(const std::string& reason) {
  if (facts_.protocol_violation.empty()) facts_.protocol_violation = reason;
  SignalGroup(SIGKILL);
  CloseEvents();  // whatever else it writes is not read
}

void RunningWorker::PumpEvents(SteadyTime now,
                               const std::function<void(vramlab::v1::WorkerEvent)>& on_event) {
  char buffer[kReadChunk];
  std::vector<std::string> lines;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  for (int i = 0; i < kReadsPerPump && process_.events_fd >= 0; ++i) {
    ssize_t n = read(process_.events_fd, buffer, sizeof(buffer));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      // A last line cut off by the exit is dropped: the exit status tells what happened.
      CloseEvents();
      return;
    }
    lines.clear();
    if (!lines_.Append(absl::string_view(buffer, n), &lines)) {
      Violation(absl::StrCat("an event line exceeded ", limits_.max_event_line_bytes, " bytes"));
      return;
    }
    for (std::string& line : lines) {
      if (now - window_start_ >= std::chrono::seconds(1)) {
        window_start_ = now;
        window_events_ = 0;
      }
      if (++window_events_ > limits_.max_events_per_second) {
        Violation(absl::StrCat("flooded its event stream (more than ",
                               limits_.max_events_per_second, " events per second)"));
        return;
      }
      if (line.empty()) continue;
      vramlab::v1::WorkerEvent event;
      auto status = google::protobuf::util::JsonStringToMessage(line, &event, options);
      if (!status.ok() || event.payload_case() == vramlab::v1::WorkerEvent::PAYLOAD_NOT_SET) {
        std::string shown = absl::CHexEscape(line.substr(0, 120));
        Violation(absl::StrCat("wrote an invalid event line (",
                               status.ok() ? "no payload" : std::string(status.message()),
                               "): ", shown));
        return;
      }
      if (driver_view_ != nullptr) driver_view_->ProbeSpoke();
      switch (event.payload_case()) {
        case vramlab::v1::WorkerEvent::kReport:
          facts_.saw_final_report = true;
          break;
        case vramlab::v1::WorkerEvent::kOom:
          facts_.saw_oom = true;
          break;
        case vramlab::v1::WorkerEvent::kError:
          facts_.error = event.error();
          break;
        default:
          break;
      }
      on_event(std::move(event));
    }
  }
}

void RunningWorker::PumpLog() {
  char buffer[kReadChunk];
  for (int i = 0; i < kReadsPerPump && process_.log_fd >= 0; ++i) {
    ssize_t n = read(process_.log_fd, buffer, sizeof(buffer));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      CloseLog();
      return;
    }
    if (log_file_fd_ < 0) continue;
    int64_t room = limits_.max_log_bytes - log_bytes_;
    int64_t keep = std::min<int64_t>(room, n);
    if (keep > 0) {
      (void)!write(log_file_fd_, buffer, keep);
      log_bytes_ += keep;
    }
    if (keep < n && !log_truncated_) {
      log_truncated_ = true;
      std::string note =
          absl::StrCat("\n[vramlabd: log truncated at ", limits_.max_log_bytes, " bytes]\n");
      (void)!write(log_file_fd_, note.data(), note.size());
    }
  }
}

void RunningWorker::RequestStop(StopReason reason, SteadyTime now) {
  if (stop_requested_ || reaped_) return;
  stop_requested_ = true;
  switch (reason) {
    case StopReason::kCancel:
      facts_.cancelled = true;
      break;
    case StopReason::kTimeLimit:
      facts_.timed_out = true;
      break;
    case StopReason::kInterrupt:
      facts_.interrupted = true;
      break;
    case StopReason::kPeerEnded:
      break;
  }
  SignalGroup(SIGTERM);
  kill_at_ = now + limits_.cancel_grace_period;
}

void RunningWorker::CheckTimers(SteadyTime now) {
  if (reaped_) return;
  if (!stop_requested_ && now >= deadline_) RequestStop(StopReason::kTimeLimit, now);
  if (kill_at_.has_value() && now >= *kill_at_) {
    SignalGroup(SIGKILL);
    kill_at_.reset();
  }
}

bool RunningWorker::TryReap(SteadyTime now) {
  if (reaped_) return true;
  int status = 0;
  pid_t r = waitpid(process_.pid, &status, WNOHANG);
  if (r != process_.pid) return false;
  reaped_ = true;
  reaped_at_ = now;
  facts_.wait_status = status;
  SignalGroup(SIGKILL);  // leftovers of the experiment, if it started any
  leftovers_possible_ = tagged() || cgroup_ != nullptr;
  leftovers_scanned_at_ = now;
  return true;
}

bool RunningWorker::LeftoversRemain(SteadyTime now) {
  if (!leftovers_possible_) return false;
  if (now - leftovers_scanned_at_ < kLeftoverScanInterval) return true;
  leftovers_scanned_at_ = now;
  if (cgroup_ != nullptr) {
    leftovers_possible_ = !cgroup_->Empty();
    if (leftovers_possible_) cgroup_->Signal(SIGKILL);
  } else {
    // A killed process stops matching once its memory is gone (a zombie's environment reads
    // empty), so an empty scan means every tagged process has exited.
    leftovers_possible_ = SignalTaggedProcesses(command_uid_, process_tag_, SIGKILL) > 0;
  }
  return leftovers_possible_;
}

bool RunningWorker::Finished(SteadyTime now) {
  if (!reaped_) return false;
  const bool leftovers = LeftoversRemain(now);
  if (process_.events_fd < 0 && process_.log_fd < 0 && !leftovers) {
    CloseDriverView();
    return true;
  }
  if (now - reaped_at_ > kDrainAfterExit) {
    if (leftovers && log_file_fd_ >= 0) {
      std::string note = absl::StrCat(
          "\n[vramlabd: processes of this job (tag ", process_tag_,
          cgroup_ != nullptr ? absl::StrCat(", cgroup ", cgroup_->path()) : std::string(),
          ") still ran ", kDrainAfterExit.count(), " s after the program ended]\n");
      (void)!write(log_file_fd_, note.data(), note.size());
    }
    CloseEvents();
    CloseLog();
    CloseDriverView();
    return true;
  }
  return false;
}

void RunningWorker::KillAndReap() {
  if (!reaped_) {
    SignalGroup(SIGKILL);
    int status = 0;
    while (waitpid(process_.pid, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    facts_.wait_status = status;
  }
  // The daemon is stopping: its leftovers get the same time as after an ordinary end.
  leftovers_possible_ = tagged() || cgroup_ != nullptr;
  const SteadyTime deadline = std::chrono::steady_clock::now() + kDrainAfterExit;
  while (leftovers_possible_ && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kLeftoverScanInterval);
    if (!LeftoversRemain(std::chrono::steady_clock::now())) break;
  }
  if (!facts_.cancelled && !facts_.timed_out) facts_.interrupted = true;
  CloseEvents();
  CloseLog();
  CloseDriverView();
}

}  // namespace vramlab::server
