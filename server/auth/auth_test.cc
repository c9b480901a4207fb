#include <sys/stat.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/auth/authenticator.h"
#include "server/auth/token_file.h"

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAliceToken[] = "alice-token-0123456789";
constexpr char kRootToken[] = "root-token-0123456789ab";

std::string WriteTokens(const std::string& content, mode_t mode) {
  char tmpl[] = "/tmp/tokens-XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  std::ofstream(tmpl) << content;
  chmod(tmpl, mode);
  return tmpl;
}

TEST(TokenFileTest, ParsesTokensAndRolesSkippingComments) {
  auto table = ParseTokenFile(
      absl::StrCat("# team\n\n", kAliceToken, " alice user\n", kRootToken, "   root   admin\n"));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->at(kAliceToken).user, "alice");
  EXPECT_FALSE(table->at(kAliceToken).admin);
  EXPECT_TRUE(table->at(kRootToken).admin);
}

TEST(TokenFileTest, TheCommandsRoleIsASuffix) {
  auto table = ParseTokenFile(
      absl::StrCat(kAliceToken, " alice user,commands\n", kRootToken, " root admin\n"));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_TRUE(table->at(kAliceToken).may_run_commands);
  EXPECT_FALSE(table->at(kAliceToken).admin);
  EXPECT_FALSE(table->at(kRootToken).may_run_commands) << "admin alone does not run commands";
  auto bad = ParseTokenFile(absl::StrCat(kAliceToken, " alice commands\n"));
  EXPECT_THAT(bad.status().message(), HasSubstr("line 1: role must be user or admin"));
}

TEST(TokenFileTest, ErrorsNameTheLineButNeverTheToken) {
  auto bad_role = ParseTokenFile(absl::StrCat(kAliceToken, " alice superuser\n"));
  EXPECT_THAT(bad_role.status().message(), HasSubstr("line 1: role must be user or admin"));
  EXPECT_THAT(bad_role.status().message(), Not(HasSubstr(kAliceToken)));
  auto duplicate = ParseTokenFile(absl::StrCat(kAliceToken, " a user\n", kAliceToken, " b user\n"));
  EXPECT_THAT(duplicate.status().message(), HasSubstr("line 2: duplicate token"));
  EXPECT_THAT(duplicate.status().message(), Not(HasSubstr(kAliceToken)));
  EXPECT_FALSE(ParseTokenFile("short alice user\n").ok());
  EXPECT_FALSE(ParseTokenFile("# nothing\n").ok());
}

TEST(TokenFileTest, RefusesAFileReadableByOthers) {
  std::string open_file = WriteTokens(absl::StrCat(kAliceToken, " alice user\n"), 0644);
  auto refused = LoadTokenFile(open_file);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr("chmod 600"));
  chmod(open_file.c_str(), 0600);
  EXPECT_TRUE(LoadTokenFile(open_file).ok());
  std::filesystem::remove(open_file);
}

TEST(AuthenticatorTest, BearerTokenLookup) {
  Authenticator auth(*ParseTokenFile(absl::StrCat(kAliceToken, " alice user\n")));
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  EXPECT_EQ(auth.Authenticate(metadata).status().code(), absl::StatusCode::kUnauthenticated);
  std::string good = absl::StrCat("Bearer ", kAliceToken);
  metadata.emplace("authorization", good);
  ASSERT_TRUE(auth.Authenticate(metadata).ok());
  EXPECT_EQ(auth.Authenticate(metadata)->user, "alice");
  std::multimap<grpc::string_ref, grpc::string_ref> wrong{{"authorization", "Bearer nope"}};
  EXPECT_EQ(auth.Authenticate(wrong).status().code(), absl::StatusCode::kUnauthenticated);
  std::multimap<grpc::string_ref, grpc::string_ref> basic{{"authorization", "Basic abc"}};
  EXPECT_EQ(auth.Authenticate(basic).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(AuthenticatorTest, WithoutTokensEveryoneIsLocalAdmin) {
  Authenticator auth;
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  auto caller = auth.Authenticate(metadata);
  ASSERT_TRUE(caller.ok());
  EXPECT_EQ(caller->user, "local");
  EXPECT_TRUE(caller->admin);
}

TEST(AuthenticatorTest, OwnersAndAdminsMayModify) {
  EXPECT_TRUE(CheckMayModify({"alice", false}, "alice").ok());
  EXPECT_EQ(CheckMayModify({"alice", false}, "bob").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(CheckMayModify({"root", true}, "bob").ok());
}

TEST(ListenPolicyTest, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackListenAddress("127.0.0.1:7433"));
  EXPECT_TRUE(IsLoopbackListenAddress("127.1.2.3:0"));
  EXPECT_TRUE(IsLoopbackListenAddress("localhost:7433"));
  EXPECT_TRUE(IsLoopbackListenAddress("[::1]:7433"));
  EXPECT_FALSE(IsLoopbackListenAddress("0.0.0.0:7433"));
  EXPECT_FALSE(IsLoopbackListenAddress("[::]:7433"));
  EXPECT_FALSE(IsLoopbackListenAddress("10.0.0.5:7433"));
}

}  // namespace
}  // namespace vramlab::server
