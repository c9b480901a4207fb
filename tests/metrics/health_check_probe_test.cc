// The container's HEALTHCHECK — the command in the Dockerfile, `vramlab ... server --health`, run
// as written but from the build tree — against a real vramlabd: it asks grpc.health.v1, so it
// needs no token even when the API requires one, and it fails when the daemon is gone. The
// daemon's per-service answers (what Kubernetes' grpc probe asks) are checked with raw calls.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

// These tests run no experiment, so any executable stands in for the worker.
constexpr char kNoWorker[] = "--worker-path=/bin/true";

// The Dockerfile's HEALTHCHECK CMD (its exec form), the installed path replaced by the build's
// binary and the container's port by `address`.
std::vector<std::string> HealthCheckCommand(const std::string& address) {
  std::ifstream in(SourceDir() + "/Dockerfile");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = absl::StrReplaceAll(text, {{"\\\n", " "}});
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(R"(\nHEALTHCHECK [^\n]*CMD \[([^\]]*)\])")))
    return {};
  std::vector<std::string> argv;
  const std::string list = match[1];
  const std::regex quoted("\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), quoted);
       it != std::sregex_iterator(); ++it) {
    std::string arg = (*it)[1];
    if (arg == "/usr/local/bin/vramlab") arg = DaemonHarness::BinDir() + "/vramlab";
    if (arg == "127.0.0.1:7433") arg = address;
    argv.push_back(arg);
  }
  return argv;
}

CommandResult Probe(const std::string& address) {
  std::vector<std::string> argv = HealthCheckCommand(address);
  // A clean environment, as in the container: no VRAMLAB_* from the caller.
  argv.insert(argv.begin(), {"env", "-i", "HOME=/nonexistent"});
  return RunCommand(argv);
}

TEST(HealthCheckProbeTest, TheDockerfileRunsTheCliHealthCheck) {
  const std::vector<std::string> argv = HealthCheckCommand("ADDRESS");
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv.front(), DaemonHarness::BinDir() + "/vramlab");
  EXPECT_EQ(std::vector<std::string>(argv.end() - 2, argv.end()),
            (std::vector<std::string>{"server", "--health"}));
}

TEST(HealthCheckProbeTest, ServingDaemonPassesAndStoppedDaemonFails) {
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string address = (*daemon)->address();
  const CommandResult serving = Probe(address);
  EXPECT_EQ(serving.exit_code, 0) << serving.output;
  EXPECT_TRUE(absl::StrContains(serving.output, "SERVING")) << serving.output;

  auto stopped = (*daemon)->Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  const CommandResult gone = Probe(address);
  EXPECT_NE(gone.exit_code, 0) << gone.output;
  EXPECT_TRUE(absl::StrContains(gone.output, "UNAVAILABLE")) << gone.output;
}

// HealthCheckRequest{service: name}: field 1, length-delimited.
std::string HealthRequest(const std::string& service) {
  return service.empty()
             ? ""
             : absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())), service);
}

// Per-service probes (Kubernetes grpc.service, grpc_health_probe -service) ask for the API by its
// full name; an unknown name is NOT_FOUND.
TEST(HealthCheckProbeTest, AnswersForTheServiceNameToo) {
  auto daemon = DaemonHarness::Start({.extra_flags = {kNoWorker}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto serving = RawUnaryCall((*daemon)->channel(), "/grpc.health.v1.Health/Check",
                              HealthRequest("vramlab.v1.VramlabService"));
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_EQ(*serving, std::string("\x08\x01", 2));  // status: SERVING
  auto unknown = RawUnaryCall((*daemon)->channel(), "/grpc.health.v1.Health/Check",
                              HealthRequest("vramlab.v1.NoSuchService"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
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
  // ...and the health check still passes without one.
  const CommandResult probe = Probe((*daemon)->address());
  EXPECT_EQ(probe.exit_code, 0) << probe.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vramlab::testing
