#include "client/connection_options.h"

#include <sys/stat.h>

#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/config_file.h"
#include "client/flag_values.h"
#include "common/status_macros.h"

namespace vramlab::client {

void AddConnectionFlags(FlagSet& flags) {
  flags.Value("addr", "HOST:PORT", "daemon address (env VRAMLAB_ADDR; default 127.0.0.1:7433)")
      .Env("VRAMLAB_ADDR")
      .Value("token", "TOKEN", "bearer token (env VRAMLAB_TOKEN); never printed")
      .Env("VRAMLAB_TOKEN")
      .Value("ca-cert", "FILE", "use TLS, trusting this CA certificate (env VRAMLAB_CA_CERT)")
      .Env("VRAMLAB_CA_CERT")
      .Value("timeout", "DURATION", "deadline of each request (default 30s)")
      .Value("config", "FILE", "config file (default $XDG_CONFIG_HOME/vramlab/config)");
}

std::string DefaultConfigPath(const std::function<const char*(const char*)>& getenv) {
  const char* xdg = getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg != '\0') return absl::StrCat(xdg, "/vramlab/config");
  const char* home = getenv("HOME");
  if (home != nullptr && *home != '\0') return absl::StrCat(home, "/.config/vramlab/config");
  return "";
}

namespace {

// The addr/token/ca-cert values of the config file at `path`, read and applied to options of the
// same names by CLI11 through ConfigFileFormat. A missing file is an error only when `required`.
absl::StatusOr<std::map<std::string, std::string>> ConfigFileValues(const std::string& path,
                                                                    bool required) {
  CLI::App app;
  app.set_help_flag();
  std::map<std::string, std::string> values;
  std::vector<CLI::Option*> options;
  for (const std::string& key : ConfigFileKeys()) {
    options.push_back(app.add_option(absl::StrCat("--", key))->expected(1));
  }
  app.config_formatter(std::make_shared<ConfigFileFormat>(path));
  app.set_config("--config", path, "config file", required);
  try {
    app.parse(std::vector<std::string>{});
  } catch (const CLI::FileError&) {
    return absl::InvalidArgumentError(absl::StrCat("--config: cannot read ", path));
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  for (CLI::Option* option : options) {
    if (option->count() > 0) values[option->get_name().substr(2)] = option->results().back();
  }
  return values;
}

}  // namespace

absl::StatusOr<ConnectionOptions> ResolveConnectionOptions(
    const ParsedArgs& args, const std::function<const char*(const char*)>& getenv) {
  ConnectionOptions options;
  std::map<std::string, std::string> file_values;
  const auto explicit_config = args.Get("config");
  const std::string config_path = explicit_config.value_or(DefaultConfigPath(getenv));
  if (!config_path.empty()) {
    // The default file may be absent; one that exists must be readable, like a named one.
    struct stat info {};
    const bool required = explicit_config.has_value() || stat(config_path.c_str(), &info) == 0;
    ASSIGN_OR_RETURN(file_values, ConfigFileValues(config_path, required));
    if (file_values.count("token") > 0 && stat(config_path.c_str(), &info) == 0 &&
        (info.st_mode & 077) != 0) {
      options.warning = absl::StrCat("warning: ", config_path,
                                     " holds a token and is readable by others (chmod 600 it)");
    }
  }
  // The command line or the environment (CLI11 fills a flag from its variable, flag.Env), then
  // the config file, then the default. The file is read apart from that App so that it ranks
  // below the environment (CLI11's own config handling ranks it above).
  const auto pick = [&](const char* flag, std::string& out) {
    if (auto v = args.Get(flag)) {
      out = *v;
    } else if (auto it = file_values.find(flag); it != file_values.end()) {
      out = it->second;
    }
  };
  pick("addr", options.address);
  pick("token", options.token);
  pick("ca-cert", options.ca_cert_path);
  if (options.address.empty()) return absl::InvalidArgumentError("--addr: empty address");
  // A token travels in an HTTP/2 header: printable ASCII only. The token itself is never printed.
  for (size_t i = 0; i < options.token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(options.token[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--token (or VRAMLAB_TOKEN, or the config file): byte %d is 0x%02x; a token may hold "
          "printable ASCII characters only, no spaces, tabs, newlines or non-ASCII bytes",
          i + 1, c));
    }
  }
  if (auto v = args.Get("timeout")) {
    ASSIGN_OR_RETURN(options.timeout, ParseDurationFlag("timeout", *v));
    if (options.timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--timeout: must be positive");
    }
  }
  return options;
}

}  // namespace vramlab::client
