// How `vramlab ARGS...` is read before any command runs: global flags before the command, `help`,
// `--help`/`-h`, `--version`, and unknown commands (with the nearest one suggested).
#ifndef VRAMLAB_CLIENT_COMMAND_LINE_H_
#define VRAMLAB_CLIENT_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands.h"

namespace vramlab::client {

struct Invocation {
  // The command to run or to show the help of; nullptr: the top-level help.
  const Command* command = nullptr;
  // The command's arguments: the flags given before it, then everything after it. They are parsed
  // with the command's full flag set, so global flags may sit on either side of the command.
  std::vector<std::string> args;
  // Print the help (of `command`, or the top-level one) instead of running anything.
  bool help = false;
};

// Reads `args` (argv without the program name):
//   [LEADING FLAGS] COMMAND [ARGS]   the command; leading flags must be global ones (LeadingFlags)
//   [LEADING FLAGS] help [COMMAND]   help of COMMAND, or the top-level help
//   --help / -h (no command)         the top-level help
//   --version                        the version command (with the other leading flags)
// Unknown commands, flags before the command that are not global ones, and flags without a command
// are INVALID_ARGUMENT, naming what was wrong and the nearest match.
absl::StatusOr<Invocation> ReadCommandLine(const std::vector<std::string>& args);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_COMMAND_LINE_H_
