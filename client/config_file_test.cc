#include "client/config_file.h"

#include <fstream>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// An app with the config-file keys as options, reading `path` through ConfigFileFormat.
struct ConfiguredApp {
  explicit ConfiguredApp(const std::string& path) {
    app.set_help_flag();
    addr = app.add_option("--addr")->expected(1);
    token = app.add_option("--token")->expected(1);
    ca_cert = app.add_option("--ca-cert")->expected(1);
    app.config_formatter(std::make_shared<ConfigFileFormat>(path));
    app.set_config("--config", path, "config file", /*config_required=*/true);
  }
  CLI::App app;
  CLI::Option* addr;
  CLI::Option* token;
  CLI::Option* ca_cert;
};

TEST(ConfigFileFormatTest, BothSeparatorsCommentsAndQuotesReachTheOptions) {
  const std::string path = WriteFile(
      "both.cfg", "# team daemon\n\naddr = gpu:7433\ntoken: 'abc'\n  ca-cert=\"/ca.pem\"\n");
  ConfiguredApp configured(path);
  configured.app.parse(std::vector<std::string>{});
  EXPECT_EQ(configured.addr->results().back(), "gpu:7433");
  EXPECT_EQ(configured.token->results().back(), "abc");
  EXPECT_EQ(configured.ca_cert->results().back(), "/ca.pem");
}

TEST(ConfigFileFormatTest, TheCommandLineBeatsTheFile) {
  const std::string path = WriteFile("precedence.cfg", "addr = file:1\ntoken = file-token\n");
  ConfiguredApp configured(path);
  configured.app.parse(std::vector<std::string>{"flag:2", "--addr"});  // reversed argv
  EXPECT_EQ(configured.addr->results().back(), "flag:2");
  EXPECT_EQ(configured.token->results().back(), "file-token");
  EXPECT_EQ(configured.ca_cert->count(), 0u);
}

TEST(ConfigFileFormatTest, ErrorsNameTheFileAndLine) {
  const std::string unknown = WriteFile("unknown.cfg", "addr = x\nadress = y\n");
  ConfiguredApp with_unknown(unknown);
  try {
    with_unknown.app.parse(std::vector<std::string>{});
    FAIL() << "an unknown key was accepted";
  } catch (const CLI::ParseError& error) {
    EXPECT_THAT(std::string(error.what()),
                HasSubstr(unknown + ":2: unknown key \"adress\" (known: addr, token, ca-cert)"));
  }
  EXPECT_THAT(std::string(ParseConfigFile("\n\njust words\n", "cfg").status().message()),
              HasSubstr("cfg:3: expected \"key = value\""));
  ConfiguredApp missing(::testing::TempDir() + "/no-such.cfg");
  EXPECT_THROW(missing.app.parse(std::vector<std::string>{}), CLI::FileError);
}

TEST(ConfigFileFormatTest, ToConfigWritesWhatTheFileWouldHold) {
  const std::string path = WriteFile("round-trip.cfg", "addr = gpu:7433\n");
  ConfiguredApp configured(path);
  configured.app.parse(std::vector<std::string>{});
  const std::string written = ConfigFileFormat(path).to_config(&configured.app, false, false, "");
  EXPECT_EQ(written, "addr = gpu:7433\n");
  EXPECT_EQ(*ParseConfigFile(written, "again"),
            (std::map<std::string, std::string>{{"addr", "gpu:7433"}}));
}

}  // namespace
}  // namespace vramlab::client
