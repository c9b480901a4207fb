// How `vramlab ARGS...` is read: the whole command line is one CLI::App built from the command
// table (commands.h) and each command's flag table (flag_set.h) — global flags on the top-level
// App (with their environment fallbacks), one subcommand per command, `help [COMMAND]` — and its
// --help texts are that App's (help_format.h).
#ifndef VRAMLAB_CLIENT_COMMAND_LINE_H_
#define VRAMLAB_CLIENT_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/commands.h"
#include "client/flag_set.h"

namespace vramlab::client {

struct Invocation {
  // The command to run or to show the help of; nullptr: the top-level help.
  const Command* command = nullptr;
  // Its flags (global ones before or after the command, its own after it; values from the
  // environment where a flag has a variable and the line does not give it) and positionals.
  ParsedArgs args;
  // Print the help (of `command`, or the top-level one) instead of running anything.
  bool help = false;
};

// Reads `args` (argv without the program name):
//   [GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]   the command; "--" may stand before COMMAND
//   [GLOBAL FLAGS] help [COMMAND]           help of COMMAND, or the top-level help
//   --help / -h (with or without a command) the help
//   --version                               the version command
// Unknown commands, a command's own flags before it, unknown flags, missing values and values
// given to boolean flags are INVALID_ARGUMENT, naming what was wrong and the nearest match.
absl::StatusOr<Invocation> ReadCommandLine(const std::vector<std::string>& args);

// The --help text of `command`, or the top-level one for nullptr.
std::string HelpText(const Command* command);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_COMMAND_LINE_H_
