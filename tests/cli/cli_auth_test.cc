// The CLI against a daemon that requires tokens, over TLS: tokens from the flag, the environment
// and the config file; refused and missing tokens as one line; tokens never echoed.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::cli_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kAliceToken[] = "alice-0123456789abcdef";
constexpr char kBobToken[] = "bob-fedcba9876543210";

class CliAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempPath("auth"));
    mkdir(dir_->c_str(), 0700);
    const std::string tokens = *dir_ + "/tokens";
    std::ofstream(tokens) << kAliceToken << " alice user\n" << kBobToken << " bob user\n";
    chmod(tokens.c_str(), 0600);
    // A self-signed certificate for 127.0.0.1: the CLI trusts it through --ca-cert.
    const vramlab::testing::ChildResult openssl = vramlab::testing::RunChild(
        {.argv = {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                  "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                  "-keyout", *dir_ + "/key.pem", "-out", *dir_ + "/cert.pem"},
         .stderr_file = "/dev/null"});
    ASSERT_EQ(openssl.exit_code, 0) << openssl.Describe();
    auto daemon = vramlab::testing::DaemonHarness::Start(
        {.extra_flags = {"--auth-tokens=" + tokens, "--tls-cert=" + *dir_ + "/cert.pem",
                         "--tls-key=" + *dir_ + "/key.pem"},
         .enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete dir_;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }

  static CliResult Run(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.push_back("--addr=" + daemon_->address());
    if (env.count("VRAMLAB_CA_CERT") == 0 && env.count("XDG_CONFIG_HOME") == 0) {
      args.push_back("--ca-cert=" + *dir_ + "/cert.pem");
    }
    return RunCli(args, env);
  }
  static void ExpectNoToken(const CliResult& r) {
    for (const char* token : {kAliceToken, kBobToken}) {
      EXPECT_THAT(r.out, Not(HasSubstr(token)));
      EXPECT_THAT(r.err, Not(HasSubstr(token)));
    }
  }

  static vramlab::testing::DaemonHarness* daemon_;
  static std::string* dir_;
};

vramlab::testing::DaemonHarness* CliAuthTest::daemon_ = nullptr;
std::string* CliAuthTest::dir_ = nullptr;

TEST_F(CliAuthTest, MissingAndWrongTokensAreOneLineUnauthenticated) {
  CliResult missing = Run({"ls"});
  EXPECT_EQ(missing.exit_code, 6) << Describe(missing);
  EXPECT_THAT(missing.err, StartsWith("vramlab: UNAUTHENTICATED: "));
  EXPECT_THAT(missing.err, HasSubstr("set --token or VRAMLAB_TOKEN"));
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1);

  CliResult wrong = Run({"server", "--token", "not-a-token-xyz"});
  EXPECT_EQ(wrong.exit_code, 6) << Describe(wrong);
  EXPECT_THAT(wrong.err, StartsWith("vramlab: UNAUTHENTICATED: "));
  EXPECT_THAT(wrong.err, Not(HasSubstr("not-a-token-xyz")));
}

TEST_F(CliAuthTest, TokenFromFlagEnvironmentOrConfigFileOverTls) {
  CliResult flag = Run({"server", "--token", kAliceToken});
  ASSERT_EQ(flag.exit_code, 0) << Describe(flag);
  EXPECT_THAT(flag.out, HasSubstr("auth:    tokens required"));
  // The health probe needs no token (what a container HEALTHCHECK can use).
  CliResult health = Run({"server", "--health"});
  EXPECT_EQ(health.exit_code, 0) << Describe(health);
  EXPECT_EQ(health.out, "SERVING\n");
  ExpectNoToken(flag);

  CliResult env = Run({"server", "--json"}, {{"VRAMLAB_TOKEN", kAliceToken}});
  ASSERT_EQ(env.exit_code, 0) << Describe(env);
  vramlab::v1::ServerInfo info;
  ASSERT_TRUE(ParseJson(env.out, info));
  EXPECT_TRUE(info.auth_enabled());

  // Everything from $XDG_CONFIG_HOME/vramlab/config: address, token and CA.
  const std::string xdg = *dir_ + "/xdg";
  mkdir(xdg.c_str(), 0700);
  mkdir((xdg + "/vramlab").c_str(), 0700);
  const std::string config = xdg + "/vramlab/config";
  std::ofstream(config) << "addr = " << daemon_->address() << "\ntoken = " << kBobToken
                        << "\nca-cert = " << *dir_ << "/cert.pem\n";
  chmod(config.c_str(), 0600);
  CliResult from_file = RunCli({"ls"}, {{"XDG_CONFIG_HOME", xdg}});
  EXPECT_EQ(from_file.exit_code, 0) << Describe(from_file);
  EXPECT_EQ(from_file.err, "");
  chmod(config.c_str(), 0644);
  CliResult readable = RunCli({"ls"}, {{"XDG_CONFIG_HOME", xdg}});
  EXPECT_EQ(readable.exit_code, 0) << Describe(readable);
  EXPECT_THAT(readable.err, HasSubstr("readable by others"));
  ExpectNoToken(readable);
}

TEST_F(CliAuthTest, PlaintextClientCannotTalkToTheTlsDaemon) {
  CliResult r =
      RunCli({"server", "--addr", daemon_->address(), "--token", kAliceToken, "--timeout", "5s"});
  EXPECT_EQ(r.exit_code, 6) << Describe(r);
  EXPECT_THAT(r.err, StartsWith("vramlab: UNAVAILABLE: "));
}

TEST_F(CliAuthTest, OwnersCancelTheirOwnAndOwnerFilterWorks) {
  CliResult submitted = Run({"submit", "--preset", "tiny", "--dtype", "fp32", "--seq-len", "64",
                             "--steps", "10000", "--name", "alices-run"},
                            {{"VRAMLAB_TOKEN", kAliceToken}});
  ASSERT_EQ(submitted.exit_code, 0) << Describe(submitted);
  const std::string id = submitted.OutLines().at(0);

  CliResult by_bob = Run({"cancel", id}, {{"VRAMLAB_TOKEN", kBobToken}});
  EXPECT_EQ(by_bob.exit_code, 6) << Describe(by_bob);
  EXPECT_THAT(by_bob.err, StartsWith("vramlab: PERMISSION_DENIED: "));
  ExpectNoToken(by_bob);

  CliResult alice_list = Run({"ls", "--owner", "alice"}, {{"VRAMLAB_TOKEN", kBobToken}});
  EXPECT_THAT(alice_list.out, HasSubstr(id + "  alice"));
  CliResult bob_list = Run({"ls", "--owner", "bob"}, {{"VRAMLAB_TOKEN", kBobToken}});
  EXPECT_THAT(bob_list.out, Not(HasSubstr(id)));

  CliResult by_alice = Run({"cancel", id}, {{"VRAMLAB_TOKEN", kAliceToken}});
  EXPECT_EQ(by_alice.exit_code, 0) << Describe(by_alice);
  CliResult watched = Run({"watch", id, "--quiet"}, {{"VRAMLAB_TOKEN", kAliceToken}});
  EXPECT_EQ(watched.exit_code, 4) << Describe(watched);
}

TEST_F(CliAuthTest, MineIsTheUserTheTokenNames) {
  auto submit = [](const char* token, const char* name) {
    CliResult r = Run({"submit", "--preset", "tiny", "--dtype", "fp32", "--seq-len", "64",
                       "--steps", "10000", "--name", name},
                      {{"VRAMLAB_TOKEN", token}});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return r.OutLines().empty() ? std::string() : r.OutLines().at(0);
  };
  const std::string alices = submit(kAliceToken, "alices-mine");
  const std::string bobs = submit(kBobToken, "bobs-mine");

  CliResult alice_mine = Run({"ls", "--mine"}, {{"VRAMLAB_TOKEN", kAliceToken}});
  EXPECT_EQ(alice_mine.exit_code, 0) << Describe(alice_mine);
  EXPECT_THAT(alice_mine.out, HasSubstr(alices + "  alice"));
  EXPECT_THAT(alice_mine.out, Not(HasSubstr(bobs)));

  // Bob's --mine cancels Bob's alone, whatever Alice has queued or running.
  CliResult bob_cancel = Run({"cancel", "--mine"}, {{"VRAMLAB_TOKEN", kBobToken}});
  EXPECT_EQ(bob_cancel.exit_code, 0) << Describe(bob_cancel);
  EXPECT_THAT(bob_cancel.out, HasSubstr(bobs + " "));
  EXPECT_THAT(bob_cancel.out, Not(HasSubstr(alices)));
  CliResult alice_still =
      Run({"ls", "--mine", "--state", "queued,running"}, {{"VRAMLAB_TOKEN", kAliceToken}});
  EXPECT_THAT(alice_still.out, HasSubstr(alices));

  CliResult both = Run({"ls", "--mine", "--owner", "bob"}, {{"VRAMLAB_TOKEN", kAliceToken}});
  EXPECT_EQ(both.exit_code, 2) << Describe(both);
  EXPECT_THAT(both.err, HasSubstr("mine: not with owner"));
  EXPECT_EQ(Run({"cancel", alices}, {{"VRAMLAB_TOKEN", kAliceToken}}).exit_code, 0);
}

}  // namespace
}  // namespace vramlab::cli_test
