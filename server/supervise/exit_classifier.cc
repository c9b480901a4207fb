#include "server/supervise/exit_classifier.h"

#include <string.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "server/common/bounded_text.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

namespace {

// ": FIELD: MESSAGE" of the worker's error event, bounded: it becomes the state_reason that every
// listing repeats, and a worker's message may be as long as an event line (1 MiB).
std::string ErrorDetail(const std::optional<vramlab::v1::WorkerError>& error) {
  if (!error.has_value()) return "";
  std::string detail = error->field().empty()
                           ? error->message()
                           : absl::StrCat(error->field(), ": ", error->message());
  return detail.empty() ? "" : absl::StrCat(": ", BoundedText(detail, kMaxStateReasonBytes));
}

}  // namespace

ExitVerdict ClassifyExit(const WorkerRunFacts& facts) {
  ExitVerdict verdict;
  if (!facts.spawn_error.empty()) {
    verdict.reason = absl::StrCat(facts.command ? "command" : "worker",
                                  " could not be started: ", facts.spawn_error);
    verdict.abnormal = true;
    return verdict;
  }
  bool exited = WIFEXITED(facts.wait_status);
  int code = exited ? WEXITSTATUS(facts.wait_status) : 0;
  int signal = WIFSIGNALED(facts.wait_status) ? WTERMSIG(facts.wait_status) : 0;
  verdict.exit_status = exited ? code : -signal;

  // A run that completed before a cancel or the deadline took effect keeps its result.
  bool completed = exited && code == vramlab::worker::kExitSucceeded &&
                   (facts.saw_final_report || facts.command);
  if (completed && facts.protocol_violation.empty()) {
    verdict.state = Experiment::SUCCEEDED;
    return verdict;
  }
  if (!facts.protocol_violation.empty()) {
    verdict.reason = absl::StrCat("worker killed: ", facts.protocol_violation);
    verdict.abnormal = true;
    return verdict;
  }
  if (facts.interrupted) {
    verdict.state = Experiment::INTERRUPTED;
    verdict.reason = "the daemon shut down while the experiment ran";
    return verdict;
  }
  if (facts.cancelled) {
    verdict.state = Experiment::CANCELLED;
    verdict.reason = "cancelled while running";
    return verdict;
  }
  if (facts.timed_out) {
    verdict.reason =
        absl::StrCat("timed out: time limit of ", facts.time_limit_seconds, " s exceeded");
    verdict.abnormal = true;
    return verdict;
  }
  if (signal != 0) {
    verdict.reason =
        absl::StrCat(facts.command ? "command" : "worker", " crashed: killed by signal ", signal,
                     " (", strsignal(signal), ")");
    verdict.abnormal = true;
    return verdict;
  }
  if (facts.command) {
    if (facts.saw_oom) {
      verdict.state = Experiment::OOM;
      verdict.reason = absl::StrCat("out of memory (the command exited with code ", code, ")");
    } else {
      verdict.reason = absl::StrCat("command exited with code ", code, ErrorDetail(facts.error));
    }
    return verdict;
  }
  switch (code) {
    case vramlab::worker::kExitSucceeded:
      verdict.reason = "worker exited without a final report";
      verdict.abnormal = true;
      break;
    case vramlab::worker::kExitOutOfMemory:
      verdict.state = Experiment::OOM;
      verdict.reason = facts.saw_oom ? "out of memory" : "out of memory (no OOM report was sent)";
      break;
    case vramlab::worker::kExitInvalidSpec:
      verdict.reason = absl::StrCat("invalid spec", ErrorDetail(facts.error));
      break;
    case vramlab::worker::kExitLoadFailed:
      verdict.reason = absl::StrCat("loading the model failed", ErrorDetail(facts.error));
      break;
    case vramlab::worker::kExitInternalError:
      verdict.reason = absl::StrCat("worker internal error", ErrorDetail(facts.error));
      break;
    default:
      verdict.reason = absl::StrCat("worker exited with code ", code, ErrorDetail(facts.error));
      verdict.abnormal = true;
  }
  return verdict;
}

}  // namespace vramlab::server
