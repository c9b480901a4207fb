// Turns what the supervisor observed about one worker run into the experiment's final state and a
// human-readable reason. Pure function: every exit path is unit-tested without processes.
#ifndef VRAMLAB_SERVER_SUPERVISE_EXIT_CLASSIFIER_H_
#define VRAMLAB_SERVER_SUPERVISE_EXIT_CLASSIFIER_H_

#include <optional>
#include <string>

#include "common/exit_codes.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

struct WorkerRunFacts {
  // Set when the process could not be started at all; the rest is then meaningless.
  std::string spawn_error;
  // waitpid status.
  int wait_status = 0;
  // Why the daemon killed it, if it did for misbehaviour (flood, bad line, huge line).
  std::string protocol_violation;
  bool cancelled = false;
  bool timed_out = false;
  int time_limit_seconds = 0;
  // The daemon is shutting down and stopped the worker.
  bool interrupted = false;
  bool saw_final_report = false;
  bool saw_oom = false;
  std::optional<vramlab::v1::WorkerError> error;
  // The process was the submitter's own program (spec.command), not vramlab's worker: exit 0
  // succeeds with or without a final report, and another exit code is OOM when its probe
  // reported an out-of-memory, else FAILED naming the code (common/exit_codes.h does not apply).
  bool command = false;
};

struct ExitVerdict {
  vramlab::v1::Experiment::State state = vramlab::v1::Experiment::FAILED;
  std::string reason;
  // Exit code, or the negated signal number; 0 when it never ran.
  int exit_status = 0;
  // Crashed, killed by the daemon, or timed out (counted by the metrics exporter).
  bool abnormal = false;
  // A parallel run that one rank ended (server/supervise/worker_group.h): that rank. Never set
  // by ClassifyExit.
  std::optional<int> deciding_rank;
};

ExitVerdict ClassifyExit(const WorkerRunFacts& facts);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_EXIT_CLASSIFIER_H_
