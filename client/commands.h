// The subcommands of `vramlab`: name, flags, and what each runs. main.cc dispatches on the first
// argument; each command's code lives in a cmd_*.cc file.
#ifndef VRAMLAB_CLIENT_COMMANDS_H_
#define VRAMLAB_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/command_env.h"
#include "client/flag_set.h"

namespace vramlab::client {

struct Command {
  const char* name;
  const char* usage;    // synopsis after "vramlab "
  const char* summary;  // one line for the command list
  // Declares the command's own flags (connection and --json flags are added by the caller).
  void (*declare_flags)(FlagSet& flags);
  // Runs with parsed flags; returns the exit code, or an error status to print as one line.
  absl::StatusOr<int> (*run)(CommandEnv& env);
};

// Every command, in the order of `vramlab --help`.
const std::vector<Command>& AllCommands();

// The full flag set of `command`: its own flags plus --json, --help and the connection flags.
FlagSet CommandFlags(const Command& command);

// The top-level help text.
std::string TopLevelHelp();

// Implementations, one per command (cmd_*.cc).
void DeclareSubmitFlags(FlagSet& flags);
absl::StatusOr<int> RunSubmit(CommandEnv& env);
void DeclareEstimateFlags(FlagSet& flags);
absl::StatusOr<int> RunEstimate(CommandEnv& env);
void DeclareWatchFlags(FlagSet& flags);
absl::StatusOr<int> RunWatch(CommandEnv& env);
void DeclareListFlags(FlagSet& flags);
absl::StatusOr<int> RunList(CommandEnv& env);
absl::StatusOr<int> RunShow(CommandEnv& env);
absl::StatusOr<int> RunCancel(CommandEnv& env);
void DeclareServerFlags(FlagSet& flags);
absl::StatusOr<int> RunServer(CommandEnv& env);
absl::StatusOr<int> RunLogs(CommandEnv& env);
void DeclareSnapshotFlags(FlagSet& flags);
absl::StatusOr<int> RunSnapshot(CommandEnv& env);
absl::StatusOr<int> RunCompare(CommandEnv& env);
void DeclareReportFlags(FlagSet& flags);
absl::StatusOr<int> RunReport(CommandEnv& env);
// For commands without flags of their own.
inline void DeclareNoFlags(FlagSet&) {}

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_COMMANDS_H_
