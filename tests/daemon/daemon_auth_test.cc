// Authentication and authorization against a real daemon: missing and wrong tokens, cancelling
// another user's experiment, admin rights, tokens-file permissions, the non-loopback refusal, and
// TLS.
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/metrics/exposition_text.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using vramlab::v1::Experiment;

// Makes a self-signed certificate for `subject` with openssl (key without a passphrase); its exit
// code.
int MakeCertificate(const std::string& subject, const std::vector<std::string>& extra,
                    const std::string& key, const std::string& cert) {
  std::vector<std::string> argv = {"openssl", "req",   "-x509", "-newkey", "rsa:2048",
                                   "-nodes",  "-days", "1",     "-subj",   subject};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"-keyout", key, "-out", cert});
  return RunChild({.argv = argv, .stdout_file = "/dev/null", .stderr_with_stdout = true}).exit_code;
}

constexpr char kAlice[] = "alice-secret-token-00000001";
constexpr char kBob[] = "bob-secret-token-0000000002";
constexpr char kAdmin[] = "admin-secret-token-00000003";

class DaemonAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/auth-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    tokens_ = dir_ + "/tokens";
    ASSERT_TRUE(
        WriteTokensFile(
            tokens_, {{kAlice, "alice", "user"}, {kBob, "bob", "user"}, {kAdmin, "root", "admin"}})
            .ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::string tokens_;
};

TEST_F(DaemonAuthTest, TokensOwnersAndAdmins) {
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--cpu-slots=1", "--enable-fault-injection", "--auth-tokens=" + tokens_}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();

  auto anonymous = Submit(*stub, TinySpec());
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kUnauthenticated);
  auto wrong = Submit(*stub, TinySpec(), "not-a-valid-token-at-all");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  grpc::ClientContext info_context;
  vramlab::v1::ServerInfo info;
  EXPECT_EQ(stub->GetServerInfo(&info_context, {}, &info).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  vramlab::v1::ExperimentSpec hang = TinySpec();
  hang.set_fault(vramlab::v1::HANG);
  auto alices = Submit(*stub, hang, kAlice);
  ASSERT_TRUE(alices.ok()) << alices.status();
  EXPECT_EQ(alices->owner(), "alice");
  auto queued = Submit(*stub, TinySpec(), kAlice);
  ASSERT_TRUE(queued.ok());

  // Everyone authenticated may read.
  auto seen_by_bob =
      WaitForState(*stub, alices->id(), Experiment::RUNNING, absl::Seconds(30), kBob);
  ASSERT_TRUE(seen_by_bob.ok()) << seen_by_bob.status();
  EXPECT_EQ(
      WaitForState(*stub, alices->id(), Experiment::RUNNING, absl::Seconds(5), "").status().code(),
      absl::StatusCode::kUnauthenticated);
  // Bob may not cancel Alice's experiments, queued or running; Alice and an admin may.
  auto denied = Cancel(*stub, alices->id(), kBob);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("bob may not modify an experiment of alice"));
  EXPECT_EQ(Cancel(*stub, queued->id(), kBob).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Cancel(*stub, queued->id(), "").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Cancel(*stub, queued->id(), kAlice).ok());
  EXPECT_TRUE(Cancel(*stub, alices->id(), kAdmin).ok());
  EXPECT_EQ(WaitForFinalState(*stub, alices->id(), absl::Seconds(30), kAlice)->state(),
            Experiment::CANCELLED);

  grpc::ClientContext context;
  AddBearerToken(&context, kBob);
  ASSERT_TRUE(stub->GetServerInfo(&context, {}, &info).ok());
  EXPECT_TRUE(info.auth_enabled());
  // Tokens never reach the log.
  std::string log = (*daemon)->ReadLog();
  for (const char* token : {kAlice, kBob, kAdmin, "not-a-valid-token-at-all"}) {
    EXPECT_THAT(log, Not(HasSubstr(token)));
  }
}

TEST_F(DaemonAuthTest, RefusesATokensFileOthersCanRead) {
  chmod(tokens_.c_str(), 0644);
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--auth-tokens=" + tokens_}, .start_timeout = absl::Seconds(10)});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(),
              HasSubstr("--auth-tokens " + tokens_ + ": accessible by group or others"));
  EXPECT_THAT(daemon.status().message(), Not(HasSubstr(kAlice)));
}

// After --auth-max-failures wrong tokens from one address within the window, that address is
// refused (a right token too) until the window passes; each refusal is counted in metrics.
TEST_F(DaemonAuthTest, RepeatedFailuresFromOneAddressAreThrottledAndCounted) {
  // No experiment runs: any executable stands in for the worker.
  auto daemon =
      DaemonHarness::Start({.extra_flags = {"--worker-path=/bin/true", "--auth-tokens=" + tokens_,
                                            "--auth-max-failures=3", "--auth-failure-window=1h"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  auto call = [&](const std::string& token) {
    grpc::ClientContext context;
    if (!token.empty()) AddBearerToken(&context, token);
    vramlab::v1::ServerInfo info;
    return stub->GetServerInfo(&context, {}, &info);
  };
  EXPECT_TRUE(call(kAlice).ok());
  EXPECT_EQ(call("wrong-token-0000000001").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("wrong-token-0000000002").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status refused = call(kAlice);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("too many failed authentications"));
  EXPECT_EQ(call("wrong-token-0000000003").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  auto scrape = HttpGet((*daemon)->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_EQ(SeriesValue(*scrape, "vramlab_auth_failures_total"), 3) << *scrape;
  EXPECT_EQ(SeriesValue(*scrape, "vramlab_auth_throttled_total"), 2) << *scrape;
  // The health service is not the API: it still answers the throttled address.
  auto health = RawUnaryCall((*daemon)->channel(), "/grpc.health.v1.Health/Check", "");
  EXPECT_TRUE(health.ok()) << health.status();
}

TEST_F(DaemonAuthTest, RefusesATlsKeyOthersCanRead) {
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  ASSERT_EQ(MakeCertificate("/CN=x", {}, key, cert), 0)
      << "openssl is needed to make a test certificate";
  ASSERT_EQ(chmod(key.c_str(), 0640), 0);
  auto daemon =
      DaemonHarness::Start({.extra_flags = {"--worker-path=/bin/true", "--tls-cert=" + cert,
                                            "--tls-key=" + key, "--auth-tokens=" + tokens_},
                            .start_timeout = absl::Seconds(10)});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(),
              HasSubstr("--tls-key " + key + ": accessible by group or others; chmod 600 it"));
  EXPECT_THAT(daemon.status().message(), Not(HasSubstr("PRIVATE KEY")));
}

TEST_F(DaemonAuthTest, RefusesNonLoopbackWithoutTokens) {
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--listen=0.0.0.0:0"}, .start_timeout = absl::Seconds(10)});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(), HasSubstr("refusing to listen on 0.0.0.0:0"));
}

TEST_F(DaemonAuthTest, ServesTlsWithCertificateAndKey) {
  std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  ASSERT_EQ(MakeCertificate("/CN=localhost",
                            {"-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"}, key, cert),
            0)
      << "openssl is needed to make a test certificate";
  ASSERT_EQ(chmod(key.c_str(), 0600), 0);
  auto daemon = DaemonHarness::Start(
      {.extra_flags = {"--tls-cert=" + cert, "--tls-key=" + key, "--auth-tokens=" + tokens_}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::ifstream in(cert);
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto channel = grpc::CreateCustomChannel((*daemon)->address(), grpc::SslCredentials(ssl), args);
  auto stub = vramlab::v1::VramlabService::NewStub(channel);
  grpc::ClientContext context;
  AddBearerToken(&context, kAlice);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  vramlab::v1::ServerInfo info;
  grpc::Status status = stub->GetServerInfo(&context, {}, &info);
  EXPECT_TRUE(status.ok()) << status.error_message();
  // Plaintext is refused by a TLS daemon.
  auto plain = (*daemon)->NewStub();
  grpc::ClientContext plain_context;
  AddBearerToken(&plain_context, kAlice);
  plain_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_FALSE(plain->GetServerInfo(&plain_context, {}, &info).ok());
}

}  // namespace
}  // namespace vramlab::testing
