// A real vramlabd for tests: started on 127.0.0.1 with port 0 and a temporary data directory,
// its bound ports parsed from the line it prints on stderr. It can be killed with SIGKILL and
// restarted on the same data directory, or stopped gracefully.
//
// Typical use:
//   ASSERT_OK_AND_ASSIGN(auto daemon, DaemonHarness::Start({.extra_flags = {"--cpu-slots=2"}}));
//   auto stub = daemon->NewStub();
//   ...
//   daemon->Kill(); daemon->Restart();
//
// Not thread-safe: one test thread drives a harness. Stub and channel objects it returns are
// thread-safe as gRPC's are.
#ifndef VRAMLAB_TESTS_SUPPORT_DAEMON_HARNESS_H_
#define VRAMLAB_TESTS_SUPPORT_DAEMON_HARNESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"
#include "vramlab/v1/service.grpc.pb.h"

namespace vramlab::testing {

struct DaemonOptions {
  // Appended after the harness's own flags (--listen, --data-dir, --metrics-listen, --device cpu,
  // --worker-path); a later flag wins, so these may override the defaults.
  std::vector<std::string> extra_flags;
  // Empty: a fresh temporary directory, removed when the harness is destroyed.
  std::string data_dir;
  // Start the Prometheus exporter on 127.0.0.1:0 (metrics_port() is then its port).
  bool enable_metrics = true;
  // How long Start/Restart wait for the "listening" line.
  absl::Duration start_timeout = absl::Seconds(30);
};

class DaemonHarness {
 public:
  // Where vramlabd, vramlab and vramlab-worker are: $VRAMLAB_BIN_DIR, else the build's bin dir.
  static std::string BinDir();

  static absl::StatusOr<std::unique_ptr<DaemonHarness>> Start(DaemonOptions options = {});
  // Stops the daemon (SIGTERM, then SIGKILL after 10 s) and removes a temporary data dir.
  ~DaemonHarness();

  DaemonHarness(const DaemonHarness&) = delete;
  DaemonHarness& operator=(const DaemonHarness&) = delete;

  // SIGKILL, as a crash would; waits for the process to be gone.
  absl::Status Kill();
  // SIGTERM (graceful shutdown) and waits up to `timeout` for exit; returns the exit status.
  absl::StatusOr<int> Stop(absl::Duration timeout = absl::Seconds(30));
  // Starts the daemon again on the same data directory (after Kill or Stop). New ports.
  // `extra_flags` replaces the options' extra flags when given.
  absl::Status Restart();
  absl::Status Restart(std::vector<std::string> extra_flags);

  bool running() const { return process_ != nullptr; }
  pid_t pid() const { return process_ != nullptr ? process_->pid() : -1; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  // "127.0.0.1:PORT" of the gRPC API.
  std::string address() const;
  const std::string& data_dir() const { return data_dir_; }
  // The daemon's stderr of the current (latest) start.
  std::string log_path() const { return log_path_; }
  std::string ReadLog() const;

  // An insecure channel to the daemon (a new one after each restart).
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  std::unique_ptr<vramlab::v1::VramlabService::Stub> NewStub() const;

 private:
  explicit DaemonHarness(DaemonOptions options);
  absl::Status Launch();

  DaemonOptions options_;
  std::string data_dir_;
  bool owns_data_dir_ = false;
  std::string log_path_;
  int starts_ = 0;
  std::unique_ptr<ChildProcess> process_;  // null while not running
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
};

// The smallest real experiment: preset "tiny" on the CPU, one step of micro-batch 1 at `seq_len`.
vramlab::v1::ExperimentSpec TinySpec(int seq_len = 32, int steps = 1);

// Adds "authorization: Bearer <token>" to a client context.
void AddBearerToken(grpc::ClientContext* context, const std::string& token);

// Polls GetExperiment until the state is final (SUCCEEDED, OOM, FAILED, CANCELLED, INTERRUPTED)
// or `timeout` passes.
absl::StatusOr<vramlab::v1::Experiment> WaitForFinalState(
    vramlab::v1::VramlabService::Stub& stub, const std::string& id,
    absl::Duration timeout = absl::Seconds(120), const std::string& token = "");

// Polls GetExperiment until the experiment is in `state` or `timeout` passes.
absl::StatusOr<vramlab::v1::Experiment> WaitForState(vramlab::v1::VramlabService::Stub& stub,
                                                     const std::string& id,
                                                     vramlab::v1::Experiment::State state,
                                                     absl::Duration timeout = absl::Seconds(60),
                                                     const std::string& token = "");

// Submits `spec`; the returned experiment or the RPC's status.
absl::StatusOr<vramlab::v1::Experiment> Submit(vramlab::v1::VramlabService::Stub& stub,
                                               const vramlab::v1::ExperimentSpec& spec,
                                               const std::string& token = "",
                                               const std::string& request_id = "");

// Submits `spec` and waits up to `timeout` for its final state: the ended experiment, or the
// status of the Submit or of the wait.
absl::StatusOr<vramlab::v1::Experiment> SubmitAndWaitForFinalState(
    vramlab::v1::VramlabService::Stub& stub, const vramlab::v1::ExperimentSpec& spec,
    absl::Duration timeout = absl::Seconds(300), const std::string& token = "");

// Cancels `id`; the returned experiment or the RPC's status.
absl::StatusOr<vramlab::v1::Experiment> Cancel(vramlab::v1::VramlabService::Stub& stub,
                                               const std::string& id,
                                               const std::string& token = "");

// Reads a whole WatchExperiment stream (until the server ends it or `timeout`).
absl::StatusOr<std::vector<vramlab::v1::ExperimentEvent>> WatchAll(
    vramlab::v1::VramlabService::Stub& stub, const std::string& id, int64_t after_sequence = 0,
    absl::Duration timeout = absl::Seconds(120), const std::string& token = "");

struct TokenLine {
  std::string token;  // at least 16 characters
  std::string user;
  std::string role;  // "user" or "admin"
};
// Writes an --auth-tokens file (mode 0600) at `path`.
absl::Status WriteTokensFile(const std::string& path, const std::vector<TokenLine>& lines);

// Calls `method` ("/package.Service/Method") with raw request bytes, as a client with a broken or
// foreign protobuf would; the response bytes or the call's status.
absl::StatusOr<std::string> RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                                         const std::string& method,
                                         const std::string& request_bytes);

// Converts a gRPC status to an absl::Status with the same code and message.
absl::Status ToAbsl(const grpc::Status& status);

bool IsFinalState(vramlab::v1::Experiment::State state);

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_DAEMON_HARNESS_H_
