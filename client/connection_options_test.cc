#include "client/connection_options.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;

struct FakeEnvironment {
  std::map<std::string, std::string> values;
  std::function<const char*(const char*)> Getter() {
    return [this](const char* name) -> const char* {
      auto it = values.find(name);
      return it == values.end() ? nullptr : it->second.c_str();
    };
  }
};

ParsedArgs Parse(const std::vector<std::string>& argv) {
  FlagSet flags("x", "x");
  AddConnectionFlags(flags);
  return *flags.Parse(argv);
}

std::string WriteConfig(const std::string& dir, const std::string& contents, mode_t mode) {
  mkdir(dir.c_str(), 0700);
  mkdir((dir + "/vramlab").c_str(), 0700);
  const std::string path = dir + "/vramlab/config";
  std::ofstream(path) << contents;
  chmod(path.c_str(), mode);
  return path;
}

TEST(ConnectionOptionsTest, DefaultsWithoutFlagsEnvironmentOrFile) {
  FakeEnvironment env;
  auto options = ResolveConnectionOptions(Parse({}), env.Getter());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->address, kDefaultAddress);
  EXPECT_EQ(options->token, "");
  EXPECT_EQ(options->timeout, absl::Seconds(30));
}

TEST(ConnectionOptionsTest, FlagBeatsEnvironmentBeatsConfigFile) {
  const std::string dir = ::testing::TempDir() + "/xdg-precedence";
  WriteConfig(dir, "# team daemon\naddr = file:1\ntoken: \"file-token\"\nca-cert = /file/ca.pem\n",
              0600);
  FakeEnvironment env;
  env.values["XDG_CONFIG_HOME"] = dir;
  auto from_file = ResolveConnectionOptions(Parse({}), env.Getter());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->address, "file:1");
  EXPECT_EQ(from_file->token, "file-token");
  EXPECT_EQ(from_file->ca_cert_path, "/file/ca.pem");
  EXPECT_EQ(from_file->warning, "");

  // The flags' environment variables, which CLI11 reads while parsing.
  setenv("VRAMLAB_ADDR", "env:2", 1);
  setenv("VRAMLAB_TOKEN", "env-token", 1);
  const ParsedArgs env_args = Parse({});
  const ParsedArgs flag_args = Parse({"--addr", "flag:3", "--token", "t", "--timeout", "5s"});
  unsetenv("VRAMLAB_ADDR");
  unsetenv("VRAMLAB_TOKEN");
  auto from_env = ResolveConnectionOptions(env_args, env.Getter());
  EXPECT_EQ(from_env->address, "env:2");
  EXPECT_EQ(from_env->token, "env-token");
  EXPECT_EQ(from_env->ca_cert_path, "/file/ca.pem");

  auto from_flags = ResolveConnectionOptions(flag_args, env.Getter());
  EXPECT_EQ(from_flags->address, "flag:3");
  EXPECT_EQ(from_flags->token, "t");
  EXPECT_EQ(from_flags->timeout, absl::Seconds(5));
}

TEST(ConnectionOptionsTest, HomeConfigIsTheFallbackAndReadableTokensWarn) {
  const std::string home = ::testing::TempDir() + "/home-fallback";
  mkdir(home.c_str(), 0700);
  WriteConfig(home + "/.config", "token = secret\n", 0644);
  FakeEnvironment env;
  env.values["HOME"] = home;
  auto options = ResolveConnectionOptions(Parse({}), env.Getter());
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->token, "secret");
  EXPECT_THAT(options->warning, HasSubstr("chmod 600"));
  EXPECT_THAT(options->warning, ::testing::Not(HasSubstr("secret")));
}

TEST(ConnectionOptionsTest, BadConfigFilesAndFlags) {
  EXPECT_THAT(std::string(ParseConfigFile("adress = x\n", "cfg").status().message()),
              HasSubstr("cfg:1: unknown key \"adress\""));
  EXPECT_THAT(std::string(ParseConfigFile("\n\njust words\n", "cfg").status().message()),
              HasSubstr("cfg:3"));
  FakeEnvironment env;
  EXPECT_FALSE(
      ResolveConnectionOptions(Parse({"--config", "/nonexistent/cfg"}), env.Getter()).ok());
  EXPECT_FALSE(ResolveConnectionOptions(Parse({"--timeout", "0s"}), env.Getter()).ok());
  EXPECT_FALSE(ResolveConnectionOptions(Parse({"--timeout", "later"}), env.Getter()).ok());
}

TEST(ConnectionOptionsTest, ATokenThatCannotTravelInAHeaderIsRefusedWithoutPrintingIt) {
  FakeEnvironment env;
  for (const std::string& token :
       {std::string("secret\tpart-0001"), std::string("secret\npart-0001"),
        std::string("secret\xc3\xa9-0001"), std::string("secret part-0001")}) {
    auto options = ResolveConnectionOptions(Parse({"--token", token}), env.Getter());
    ASSERT_FALSE(options.ok());
    EXPECT_THAT(std::string(options.status().message()), HasSubstr("--token"));
    EXPECT_THAT(std::string(options.status().message()), HasSubstr("printable ASCII"));
    EXPECT_THAT(std::string(options.status().message()), ::testing::Not(HasSubstr("secret")));
  }
  EXPECT_TRUE(
      ResolveConnectionOptions(Parse({"--token", "Abc-._~+/=0123456789"}), env.Getter()).ok());
}

}  // namespace
}  // namespace vramlab::client
