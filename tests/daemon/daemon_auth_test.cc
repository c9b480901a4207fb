// Authentication and authorization against a real daemon: missing and wrong tokens, cancelling
// another user's experiment, admin rights, tokens-file permissions, the non-loopback refusal, and
// TLS.
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using vramlab::v1::Experiment;

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
        WriteTokensFile(tokens_, {{kAlice, "alice", "user"}, {kBob, "bob", "user"},
                                  {kAdmin, "root", "admin"}})
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
  auto seen_by_bob = WaitForState(*stub, alices->id(), Experiment::RUNNING, absl::Seconds(30), kBob);
  ASSERT_TRUE(seen_by_bob.ok()) << seen_by_bob.status();
  EXPECT_EQ(WaitForState(*stub, alices->id(), Experiment::RUNNING, absl::Seconds(5), "").status()
                .code(),
            absl::StatusCode::kUnauthenticated);
  // Bob may not cancel Alice's experiments, queued or running; Alice and an admin may.
  auto denied = Cancel(*stub, alices->id(), kBob);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("bob may not modify an experiment of alice"));
  EXPECT_EQ(Cancel(*stub, queued->id(), kBob).status().code(),
            absl::StatusCode::kPermissionDenied);
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
  auto daemon = DaemonHarness::Start({.extra_flags = {"--auth-tokens=" + tokens_},
                                      .start_timeout = absl::Seconds(10)});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(), HasSubstr("accessible by group or others"));
  EXPECT_THAT(daemon.status().message(), Not(HasSubstr(kAlice)));
}

TEST_F(DaemonAuthTest, RefusesNonLoopbackWithoutTokens) {
  auto daemon = DaemonHarness::Start({.extra_flags = {"--listen=0.0.0.0:0"},
                                      .start_timeout = absl::Seconds(10)});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(), HasSubstr("refusing to listen on 0.0.0.0:0"));
}

TEST_F(DaemonAuthTest, ServesTlsWithCertificateAndKey) {
  std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  std::string command = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                        "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + key +
                        " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << "openssl is needed to make a test certificate";
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
