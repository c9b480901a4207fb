// The client's config file as a CLI11 config formatter: "key = value" or "key: value" lines, '#'
// comments and blank lines; a value may be quoted with " or '. Keys: addr, token, ca-cert.
// Registered with CLI::App::config_formatter, CLI11 applies the values to the options of the same
// name wherever the command line did not give them.
#ifndef VRAMLAB_CLIENT_CONFIG_FILE_H_
#define VRAMLAB_CLIENT_CONFIG_FILE_H_

#include <istream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vramlab::client {

// The keys a config file may set, each the long name of a connection flag.
const std::vector<std::string>& ConfigFileKeys();

class ConfigFileFormat : public CLI::Config {
 public:
  // `origin` names the file in errors ("ORIGIN:LINE: ...").
  explicit ConfigFileFormat(std::string origin) : origin_(std::move(origin)) {}

  // One item per key line, in file order. A line without a separator or with an unknown key
  // throws CLI::ParseError naming ORIGIN:LINE.
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

  // "key = value" for each config-file key `app` has a value for (used by --help-config style
  // dumps; the client writes no config files itself).
  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;

 private:
  std::string origin_;
};

// The key -> value map of config file text, for callers without a CLI::App. INVALID_ARGUMENT
// carries the formatter's "ORIGIN:LINE: ..." message.
absl::StatusOr<std::map<std::string, std::string>> ParseConfigFile(absl::string_view text,
                                                                   absl::string_view origin);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_CONFIG_FILE_H_
