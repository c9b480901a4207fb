#include "tests/support/daemon_harness.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vramlab::testing {
namespace {

namespace fs = std::filesystem;
using vramlab::v1::Experiment;

// The daemon prints exactly one line of this form once both listeners are bound:
//   vramlabd: listening grpc=127.0.0.1:PORT metrics=127.0.0.1:PORT   (metrics=off without one)
constexpr char kReadyPrefix[] = "vramlabd: listening ";

// Parses the port after the last ':' of "host:port"; 0 for "off".
int PortOf(absl::string_view address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return 0;
  }
  return port;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

std::string DaemonHarness::BinDir() {
  if (const char* env = std::getenv("VRAMLAB_BIN_DIR"); env != nullptr && *env != '\0') return env;
#ifdef VRAMLAB_BIN_DIR
  return VRAMLAB_BIN_DIR;
#else
  return "build/bin";
#endif
}

DaemonHarness::DaemonHarness(DaemonOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<DaemonHarness>> DaemonHarness::Start(DaemonOptions options) {
  std::unique_ptr<DaemonHarness> harness(new DaemonHarness(std::move(options)));
  if (harness->options_.data_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "vramlabd-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
    harness->data_dir_ = tmpl;
    harness->owns_data_dir_ = true;
  } else {
    harness->data_dir_ = harness->options_.data_dir;
    fs::create_directories(harness->data_dir_);
  }
  if (absl::Status s = harness->Launch(); !s.ok()) return s;
  return harness;
}

DaemonHarness::~DaemonHarness() {
  if (process_ != nullptr) {
    auto status = Stop(absl::Seconds(10));
    if (!status.ok()) (void)Kill();
  }
  if (owns_data_dir_ && std::getenv("VRAMLAB_KEEP_TEST_DATA") == nullptr) {
    std::error_code ignored;
    fs::remove_all(data_dir_, ignored);
  }
}

absl::Status DaemonHarness::Launch() {
  ++starts_;
  grpc_port_ = 0;
  metrics_port_ = 0;
  // Logs live beside the data dir's content so a failing test can print them.
  log_path_ = absl::StrCat(data_dir_, "/vramlabd-stderr-", starts_, ".log");
  std::vector<std::string> args = {
      BinDir() + "/vramlabd",
      "--listen=127.0.0.1:0",
      "--data-dir=" + data_dir_,
      "--device=cpu",
      "--worker-path=" + BinDir() + "/vramlab-worker",
  };
  if (options_.enable_metrics) args.push_back("--metrics-listen=127.0.0.1:0");
  for (const auto& flag : options_.extra_flags) args.push_back(flag);

  try {
    // The daemon must not outlive a crashed test binary.
    process_ = std::make_unique<ChildProcess>(ChildOptions{.argv = args,
                                                           .stdout_file = log_path_,
                                                           .stderr_with_stdout = true,
                                                           .die_with_parent = true});
  } catch (const std::runtime_error& e) {
    return absl::InternalError(e.what());
  }

  absl::Time deadline = absl::Now() + options_.start_timeout;
  while (true) {
    std::string log = ReadFile(log_path_);
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      if (!absl::StartsWith(line, kReadyPrefix)) continue;
      grpc_port_ = 0;
      metrics_port_ = 0;
      for (absl::string_view field : absl::StrSplit(line.substr(sizeof(kReadyPrefix) - 1), ' ')) {
        if (absl::StartsWith(field, "grpc=")) grpc_port_ = PortOf(field);
        if (absl::StartsWith(field, "metrics=")) metrics_port_ = PortOf(field);
      }
    }
    if (grpc_port_ > 0) break;
    if (process_->Exited()) {
      const ChildResult ended = process_->Wait();
      process_.reset();
      return absl::FailedPreconditionError(
          absl::StrCat("vramlabd exited during startup (status ", ended.wait_status, "):\n", log));
    }
    if (absl::Now() > deadline) {
      (void)Kill();
      return absl::DeadlineExceededError("vramlabd did not report its ports:\n" + log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
  return absl::OkStatus();
}

absl::Status DaemonHarness::Kill() {
  if (process_ == nullptr) return absl::FailedPreconditionError("daemon not running");
  process_->Signal(SIGKILL);
  process_->Wait();
  process_.reset();
  return absl::OkStatus();
}

absl::StatusOr<int> DaemonHarness::Stop(absl::Duration timeout) {
  if (process_ == nullptr) return absl::FailedPreconditionError("daemon not running");
  process_->Signal(SIGTERM);
  const std::optional<ChildResult> ended = process_->WaitFor(absl::ToChronoMilliseconds(timeout));
  if (!ended) {
    return absl::DeadlineExceededError("vramlabd did not exit after SIGTERM:\n" + ReadLog());
  }
  process_.reset();
  return ended->wait_status;
}

absl::Status DaemonHarness::Restart() {
  if (process_ != nullptr) return absl::FailedPreconditionError("daemon still running");
  return Launch();
}

absl::Status DaemonHarness::Restart(std::vector<std::string> extra_flags) {
  options_.extra_flags = std::move(extra_flags);
  return Restart();
}

std::string DaemonHarness::address() const { return absl::StrCat("127.0.0.1:", grpc_port_); }

std::string DaemonHarness::ReadLog() const { return ReadFile(log_path_); }

std::unique_ptr<vramlab::v1::VramlabService::Stub> DaemonHarness::NewStub() const {
  return vramlab::v1::VramlabService::NewStub(channel_);
}

vramlab::v1::ExperimentSpec TinySpec(int seq_len, int steps) {
  vramlab::v1::ExperimentSpec spec;
  spec.set_name("tiny");
  spec.mutable_model()->set_preset("tiny");
  spec.mutable_training()->set_micro_batch_size(1);
  spec.mutable_training()->set_grad_accum_steps(1);
  spec.mutable_training()->set_seq_len(seq_len);
  spec.mutable_training()->set_steps(steps);
  spec.mutable_training()->set_dtype(vramlab::v1::FLOAT32);
  return spec;
}

void AddBearerToken(grpc::ClientContext* context, const std::string& token) {
  context->AddMetadata("authorization", "Bearer " + token);
}

absl::Status WriteTokensFile(const std::string& path, const std::vector<TokenLine>& lines) {
  {
    std::ofstream out(path, std::ios::trunc);
    for (const TokenLine& line : lines)
      out << line.token << ' ' << line.user << ' ' << line.role << '\n';
    if (!out.flush()) return absl::InternalError("cannot write " + path);
  }
  if (chmod(path.c_str(), 0600) != 0) return absl::InternalError("chmod " + path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                                         const std::string& method,
                                         const std::string& request_bytes) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = std::move(s);
                      done = true;
                      cv.notify_all();
                    });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  if (!status.ok()) return ToAbsl(status);
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable response");
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

absl::Status ToAbsl(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool IsFinalState(Experiment::State state) {
  return state == Experiment::SUCCEEDED || state == Experiment::OOM ||
         state == Experiment::FAILED || state == Experiment::CANCELLED ||
         state == Experiment::INTERRUPTED;
}

namespace {

absl::StatusOr<Experiment> PollUntil(vramlab::v1::VramlabService::Stub& stub, const std::string& id,
                                     absl::Duration timeout, const std::string& token,
                                     const std::function<bool(const Experiment&)>& done) {
  absl::Time deadline = absl::Now() + timeout;
  Experiment last;
  while (true) {
    grpc::ClientContext context;
    if (!token.empty()) AddBearerToken(&context, token);
    vramlab::v1::GetExperimentRequest request;
    request.set_id(id);
    grpc::Status status = stub.GetExperiment(&context, request, &last);
    if (!status.ok()) return ToAbsl(status);
    if (done(last)) return last;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(id, " still ",
                                                      Experiment::State_Name(last.state()),
                                                      " after ", absl::FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
}

}  // namespace

absl::StatusOr<Experiment> WaitForFinalState(vramlab::v1::VramlabService::Stub& stub,
                                             const std::string& id, absl::Duration timeout,
                                             const std::string& token) {
  return PollUntil(stub, id, timeout, token,
                   [](const Experiment& e) { return IsFinalState(e.state()); });
}

absl::StatusOr<Experiment> WaitForState(vramlab::v1::VramlabService::Stub& stub,
                                        const std::string& id, Experiment::State state,
                                        absl::Duration timeout, const std::string& token) {
  return PollUntil(stub, id, timeout, token,
                   [state](const Experiment& e) { return e.state() == state; });
}

absl::StatusOr<Experiment> Submit(vramlab::v1::VramlabService::Stub& stub,
                                  const vramlab::v1::ExperimentSpec& spec, const std::string& token,
                                  const std::string& request_id) {
  grpc::ClientContext context;
  if (!token.empty()) AddBearerToken(&context, token);
  vramlab::v1::SubmitExperimentRequest request;
  *request.mutable_spec() = spec;
  request.set_request_id(request_id);
  Experiment experiment;
  grpc::Status status = stub.SubmitExperiment(&context, request, &experiment);
  if (!status.ok()) return ToAbsl(status);
  return experiment;
}

absl::StatusOr<Experiment> SubmitAndWaitForFinalState(vramlab::v1::VramlabService::Stub& stub,
                                                      const vramlab::v1::ExperimentSpec& spec,
                                                      absl::Duration timeout,
                                                      const std::string& token) {
  absl::StatusOr<Experiment> submitted = Submit(stub, spec, token);
  if (!submitted.ok()) return submitted.status();
  return WaitForFinalState(stub, submitted->id(), timeout, token);
}

absl::StatusOr<Experiment> Cancel(vramlab::v1::VramlabService::Stub& stub, const std::string& id,
                                  const std::string& token) {
  grpc::ClientContext context;
  if (!token.empty()) AddBearerToken(&context, token);
  vramlab::v1::CancelExperimentRequest request;
  request.set_id(id);
  Experiment experiment;
  grpc::Status status = stub.CancelExperiment(&context, request, &experiment);
  if (!status.ok()) return ToAbsl(status);
  return experiment;
}

absl::StatusOr<std::vector<vramlab::v1::ExperimentEvent>> WatchAll(
    vramlab::v1::VramlabService::Stub& stub, const std::string& id, int64_t after_sequence,
    absl::Duration timeout, const std::string& token) {
  grpc::ClientContext context;
  if (!token.empty()) AddBearerToken(&context, token);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  vramlab::v1::WatchExperimentRequest request;
  request.set_id(id);
  request.set_after_sequence(after_sequence);
  auto reader = stub.WatchExperiment(&context, request);
  std::vector<vramlab::v1::ExperimentEvent> events;
  vramlab::v1::ExperimentEvent event;
  while (reader->Read(&event)) events.push_back(event);
  grpc::Status status = reader->Finish();
  if (!status.ok()) return ToAbsl(status);
  return events;
}

}  // namespace vramlab::testing
