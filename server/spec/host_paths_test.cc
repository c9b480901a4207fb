#include "server/spec/host_paths.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class HostPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/vramlab-host-paths-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    allowed_ = root_ + "/allowed";
    outside_ = root_ + "/outside";
    ASSERT_EQ(::mkdir(allowed_.c_str(), 0700), 0);
    ASSERT_EQ(::mkdir(outside_.c_str(), 0700), 0);
    Write(allowed_ + "/ids.txt", "1 2 3");
    Write(outside_ + "/tokens", "s3cret-admin-token admin admin");
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  std::string root_, allowed_, outside_;
};

TEST_F(HostPathsTest, NoAllowedDirectoryRefusesEveryPath) {
  HostPathPolicy none;
  auto resolved = none.Resolve("training.data.token_ids_file", allowed_ + "/ids.txt");
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resolved.status().message(),
              HasSubstr("spec.training.data.token_ids_file: this daemon allows no host paths"));
}

TEST_F(HostPathsTest, FileUnderAllowedDirectoryResolves) {
  auto policy = HostPathPolicy::Create({allowed_});
  ASSERT_TRUE(policy.ok()) << policy.status();
  auto resolved = policy->Resolve("training.data.token_ids_file", allowed_ + "/./ids.txt");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  char real[PATH_MAX];
  ASSERT_NE(::realpath((allowed_ + "/ids.txt").c_str(), real), nullptr);
  EXPECT_EQ(*resolved, real);
}

TEST_F(HostPathsTest, DotDotOutOfAllowedDirectoryIsRefused) {
  auto policy = HostPathPolicy::Create({allowed_});
  ASSERT_TRUE(policy.ok());
  auto resolved = policy->Resolve("training.data.token_ids_file", allowed_ + "/../outside/tokens");
  ASSERT_FALSE(resolved.ok());
  EXPECT_THAT(resolved.status().message(), HasSubstr("not under a directory this daemon allows"));
  EXPECT_THAT(resolved.status().message(), Not(HasSubstr("s3cret")));
}

TEST_F(HostPathsTest, SymbolicLinkOutOfAllowedDirectoryIsRefused) {
  ASSERT_EQ(::symlink((outside_ + "/tokens").c_str(), (allowed_ + "/link").c_str()), 0);
  ASSERT_EQ(::symlink(outside_.c_str(), (allowed_ + "/dirlink").c_str()), 0);
  auto policy = HostPathPolicy::Create({allowed_});
  ASSERT_TRUE(policy.ok());
  for (const std::string& path : {allowed_ + "/link", allowed_ + "/dirlink/tokens"}) {
    auto resolved = policy->Resolve("model.weights_dir", path);
    ASSERT_FALSE(resolved.ok()) << path;
    EXPECT_THAT(resolved.status().message(),
                HasSubstr("spec.model.weights_dir: leads through a symbolic link outside"));
  }
}

TEST_F(HostPathsTest, MissingFileInsideSaysSoAndOutsideSaysNothingAboutExistence) {
  auto policy = HostPathPolicy::Create({allowed_});
  ASSERT_TRUE(policy.ok());
  EXPECT_THAT(policy->Resolve("f", allowed_ + "/missing").status().message(),
              HasSubstr("does not exist"));
  // A missing and an existing file outside get the same answer.
  EXPECT_EQ(policy->Resolve("f", outside_ + "/missing").status().message(),
            policy->Resolve("f", outside_ + "/tokens").status().message());
}

TEST_F(HostPathsTest, DaemonFilesAreRefusedEvenInsideAnAllowedDirectoryAndThroughHardLinks) {
  Write(allowed_ + "/tokens", "s3cret u admin");
  ASSERT_EQ(::link((allowed_ + "/tokens").c_str(), (allowed_ + "/innocent.txt").c_str()), 0);
  auto policy = HostPathPolicy::Create({allowed_}, {allowed_ + "/tokens"});
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE(policy->Resolve("f", allowed_ + "/tokens").ok());
  auto linked = policy->Resolve("f", allowed_ + "/innocent.txt");
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.status().message(), HasSubstr("one of the daemon's own files"));
  EXPECT_TRUE(policy->Resolve("f", allowed_ + "/ids.txt").ok());
}

TEST_F(HostPathsTest, AllowedDirectoryMustExist) {
  auto policy = HostPathPolicy::Create({root_ + "/nope"});
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(policy.status().message(), HasSubstr("--allowed-dir"));
  EXPECT_FALSE(HostPathPolicy::Create({"relative/dir"}).ok());
}

TEST_F(HostPathsTest, ResolveSpecRewritesBothPaths) {
  auto policy = HostPathPolicy::Create({allowed_});
  ASSERT_TRUE(policy.ok());
  vramlab::v1::ExperimentSpec spec;
  spec.mutable_model()->set_weights_dir(allowed_ + "/");
  spec.mutable_training()->mutable_data()->set_token_ids_file(allowed_ + "//ids.txt");
  ASSERT_TRUE(policy->ResolveSpec(&spec).ok());
  EXPECT_EQ(spec.model().weights_dir(), policy->dirs().front());
  EXPECT_EQ(spec.training().data().token_ids_file(), policy->dirs().front() + "/ids.txt");
  spec.mutable_training()->mutable_data()->set_token_ids_file(outside_ + "/tokens");
  EXPECT_THAT(policy->ResolveSpec(&spec).message(), HasSubstr("spec.training.data.token_ids_file"));
}

}  // namespace
}  // namespace vramlab::server
