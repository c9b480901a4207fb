// The --auth-tokens file: one "TOKEN USER ROLE" per line (role "user" or "admin", optionally
// followed by ",commands": the user may submit command experiments, server/spec/command_spec.h,
// e.g. "user,commands"); blank lines and
// lines starting with '#' are ignored. The file must be a regular file of at most 1 MiB that group
// and others have no access to (server/auth/flag_file.h). Error messages name the line number,
// never a token.
#ifndef VRAMLAB_SERVER_AUTH_TOKEN_FILE_H_
#define VRAMLAB_SERVER_AUTH_TOKEN_FILE_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace vramlab::server {

struct Principal {
  std::string user;
  bool admin = false;
  // May submit command experiments (spec.command) where the daemon allows them.
  bool may_run_commands = false;
};

using TokenTable = absl::flat_hash_map<std::string, Principal>;

// Reads and parses the file; errors about the file itself begin with "--auth-tokens <path>: ".
absl::StatusOr<TokenTable> LoadTokenFile(const std::string& path);
// Parses the file's content (no permission check).
absl::StatusOr<TokenTable> ParseTokenFile(const std::string& content);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_AUTH_TOKEN_FILE_H_
