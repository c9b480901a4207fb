// The container's HEALTHCHECK (deploy/docker/grpc-health-check.py) against a real vramlabd: it
// asks grpc.health.v1, so it needs no token even when the API requires one, and it fails when the
// daemon is gone.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

// Debian's interpreter with its python3-grpcio, unless VRAMLAB_PYTHON names another one that has
// grpcio (on a GPU host, the Python environment of the installed PyTorch).
std::string PythonInterpreter() {
  const char* python = std::getenv("VRAMLAB_PYTHON");
  return python != nullptr && *python != '\0' ? python : "/usr/bin/python3";
}

// These tests run no experiment, so any executable stands in for the worker.
constexpr char kNoWorker[] = "--worker-path=/bin/true";

CommandResult Probe(const std::string& address, const std::string& service = "") {
  return RunCommand({PythonInterpreter(), SourceDir() + "/deploy/docker/grpc-health-check.py",
                     address, "--timeout", "3", "--service", service});
}

TEST(HealthCheckProbeTest, ServingDaemonPassesAndStoppedDaemonFails) {
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string address = (*daemon)->address();
  const CommandResult serving = Probe(address);
  EXPECT_EQ(serving.exit_code, 0) << serving.output;

  auto stopped = (*daemon)->Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  const CommandResult gone = Probe(address);
  EXPECT_EQ(gone.exit_code, 1) << gone.output;
  EXPECT_TRUE(absl::StrContains(gone.output, "UNAVAILABLE")) << gone.output;
}

// Per-service probes (Kubernetes grpc.service, grpc_health_probe -service) ask for the API by its
// full name; an unknown name is NOT_FOUND, and the name goes NOT_SERVING with the server.
TEST(HealthCheckProbeTest, AnswersForTheServiceNameToo) {
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string address = (*daemon)->address();
  const CommandResult serving = Probe(address, "vramlab.v1.VramlabService");
  EXPECT_EQ(serving.exit_code, 0) << serving.output;
  const CommandResult unknown = Probe(address, "vramlab.v1.NoSuchService");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_TRUE(absl::StrContains(unknown.output, "NOT_FOUND")) << unknown.output;
  auto stopped = (*daemon)->Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  const CommandResult gone = Probe(address, "vramlab.v1.VramlabService");
  EXPECT_EQ(gone.exit_code, 1) << gone.output;
}

TEST(HealthCheckProbeTest, NeedsNoTokenWhenTheApiDoes) {
  char dir[] = "/tmp/vramlab-health-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string tokens = absl::StrCat(dir, "/tokens");
  std::ofstream(tokens) << "s3cret-admin-token alice admin\n";
  ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {kNoWorker, "--auth-tokens=" + tokens}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  // The API refuses a caller without a token...
  auto stub = (*daemon)->NewStub();
  grpc::ClientContext context;
  vramlab::v1::ServerInfo info;
  const grpc::Status status = stub->GetServerInfo(&context, {}, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  // ...and the health service still answers the probe.
  const CommandResult probe = Probe((*daemon)->address());
  EXPECT_EQ(probe.exit_code, 0) << probe.output;
  std::filesystem::remove_all(dir);
}

TEST(HealthCheckProbeTest, BadArgumentIsAUsageError) {
  const CommandResult r = RunCommand({PythonInterpreter(),
                                      SourceDir() + "/deploy/docker/grpc-health-check.py",
                                      "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace vramlab::testing
