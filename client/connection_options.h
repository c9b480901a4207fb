// Where the daemon is and how to authenticate: --addr/--token/--ca-cert flags, then the
// VRAMLAB_ADDR/VRAMLAB_TOKEN/VRAMLAB_CA_CERT environment, then the config file
// ($XDG_CONFIG_HOME/vramlab/config or ~/.config/vramlab/config), then defaults.
#ifndef VRAMLAB_CLIENT_CONNECTION_OPTIONS_H_
#define VRAMLAB_CLIENT_CONNECTION_OPTIONS_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/config_file.h"
#include "client/flag_set.h"

namespace vramlab::client {

inline constexpr char kDefaultAddress[] = "127.0.0.1:7433";

struct ConnectionOptions {
  std::string address = kDefaultAddress;
  // Bearer token; never printed. Empty: no authorization metadata.
  std::string token;
  // PEM file of the CA that signed the daemon's certificate; empty: plaintext.
  std::string ca_cert_path;
  // Deadline of each unary call (streams that follow a run have none).
  absl::Duration timeout = absl::Seconds(30);
  // Lines to show the user (e.g. a config file others can read that holds a token).
  std::string warning;
};

// Declares --addr, --token, --ca-cert, --timeout and --config on `flags`.
void AddConnectionFlags(FlagSet& flags);

// The default config path from the environment, or "" when neither XDG_CONFIG_HOME nor HOME is set.
std::string DefaultConfigPath(const std::function<const char*(const char*)>& getenv);

// Resolves the options with the precedence above, from `args` parsed with the flags'
// environment fallbacks (AddConnectionFlags declares them; CLI11 reads them). `getenv` finds the
// default config file and is injectable for tests. A missing default config file is fine; a
// missing --config file is INVALID_ARGUMENT.
absl::StatusOr<ConnectionOptions> ResolveConnectionOptions(
    const ParsedArgs& args, const std::function<const char*(const char*)>& getenv);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_CONNECTION_OPTIONS_H_
