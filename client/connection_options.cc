#include "client/connection_options.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/file_io.h"
#include "client/flag_values.h"
#include "common/status_macros.h"

namespace vramlab::client {

void AddConnectionFlags(FlagSet& flags) {
  flags.Value("addr", "HOST:PORT", "daemon address (env VRAMLAB_ADDR; default 127.0.0.1:7433)")
      .Value("token", "TOKEN", "bearer token (env VRAMLAB_TOKEN); never printed")
      .Value("ca-cert", "FILE", "use TLS, trusting this CA certificate (env VRAMLAB_CA_CERT)")
      .Value("timeout", "DURATION", "deadline of each request (default 30s)")
      .Value("config", "FILE", "config file (default $XDG_CONFIG_HOME/vramlab/config)");
}

absl::StatusOr<std::map<std::string, std::string>> ParseConfigFile(absl::string_view text,
                                                                   absl::string_view origin) {
  std::map<std::string, std::string> values;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const size_t separator = line.find_first_of("=:");
    if (separator == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ":", line_number, ": expected \"key = value\""));
    }
    const std::string key(absl::StripAsciiWhitespace(line.substr(0, separator)));
    std::string value(absl::StripAsciiWhitespace(line.substr(separator + 1)));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (key != "addr" && key != "token" && key != "ca-cert") {
      return absl::InvalidArgumentError(absl::StrCat(origin, ":", line_number, ": unknown key \"",
                                                     key, "\" (known: addr, token, ca-cert)"));
    }
    values[key] = value;
  }
  return values;
}

std::string DefaultConfigPath(const std::function<const char*(const char*)>& getenv) {
  const char* xdg = getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg != '\0') return absl::StrCat(xdg, "/vramlab/config");
  const char* home = getenv("HOME");
  if (home != nullptr && *home != '\0') return absl::StrCat(home, "/.config/vramlab/config");
  return "";
}

absl::StatusOr<ConnectionOptions> ResolveConnectionOptions(
    const ParsedArgs& args, const std::function<const char*(const char*)>& getenv) {
  ConnectionOptions options;
  std::map<std::string, std::string> file_values;
  const auto explicit_config = args.Get("config");
  const std::string config_path = explicit_config.value_or(DefaultConfigPath(getenv));
  struct stat info {};
  if (!config_path.empty() && (explicit_config || stat(config_path.c_str(), &info) == 0)) {
    ASSIGN_OR_RETURN(std::string text, ReadFileOrStdin(config_path));
    ASSIGN_OR_RETURN(file_values, ParseConfigFile(text, config_path));
    if (file_values.count("token") > 0 && stat(config_path.c_str(), &info) == 0 &&
        (info.st_mode & 077) != 0) {
      options.warning = absl::StrCat("warning: ", config_path,
                                     " holds a token and is readable by others (chmod 600 it)");
    }
  }
  const auto pick = [&](const char* flag, const char* env, const char* key, std::string& out) {
    if (auto v = args.Get(flag)) {
      out = *v;
    } else if (const char* e = getenv(env); e != nullptr && *e != '\0') {
      out = e;
    } else if (auto it = file_values.find(key); it != file_values.end()) {
      out = it->second;
    }
  };
  pick("addr", "VRAMLAB_ADDR", "addr", options.address);
  pick("token", "VRAMLAB_TOKEN", "token", options.token);
  pick("ca-cert", "VRAMLAB_CA_CERT", "ca-cert", options.ca_cert_path);
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
