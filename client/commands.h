// The subcommands of `vramlab`: name, flags, and what each runs. main.cc dispatches on the first
// argument; each command's code lives in a cmd_*.cc file.
#ifndef VRAMLAB_CLIENT_COMMANDS_H_
#define VRAMLAB_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
  // Runs without the daemon: the connection flags are accepted but not resolved (a broken config
  // file does not stop `vramlab version`).
  bool local = false;
  // More lines for `vramlab help COMMAND`, after the summary; nullptr when the summary says it all.
  const char* details = nullptr;
};

// Every command, in the order of `vramlab --help`.
const std::vector<Command>& AllCommands();

// The names a command line may start with: every command's, then "help".
std::vector<std::string> CommandNames();

// The command called `name`, or nullptr.
const Command* FindCommand(absl::string_view name);

// Declares the flags every command takes: --json, the connection flags and --help/-h.
void AddGlobalFlags(FlagSet& flags);

// The flags `command` declares itself, with its usage and its summary (and details) as the
// table's summary.
FlagSet OwnFlags(const Command& command);

// The full flag set of `command`: its own flags plus the global ones.
FlagSet CommandFlags(const Command& command);

// The flags of the top level, accepted before or after any command: the global ones plus
// --version.
FlagSet LeadingFlags();

// The top-level help's text before the command list, and after it.
std::string TopLevelHelpIntro();
std::string TopLevelHelpOutro();

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
void DeclareCancelFlags(FlagSet& flags);
absl::StatusOr<int> RunCancel(CommandEnv& env);
void DeclareUpdateFlags(FlagSet& flags);
absl::StatusOr<int> RunUpdate(CommandEnv& env);
absl::StatusOr<int> RunHold(CommandEnv& env);
absl::StatusOr<int> RunRelease(CommandEnv& env);
absl::StatusOr<int> RunDelete(CommandEnv& env);
void DeclareLogsFlags(FlagSet& flags);
void DeclareServerFlags(FlagSet& flags);
absl::StatusOr<int> RunServer(CommandEnv& env);
absl::StatusOr<int> RunLogs(CommandEnv& env);
void DeclareSnapshotFlags(FlagSet& flags);
absl::StatusOr<int> RunSnapshot(CommandEnv& env);
absl::StatusOr<int> RunCompare(CommandEnv& env);
void DeclareReportFlags(FlagSet& flags);
absl::StatusOr<int> RunReport(CommandEnv& env);
absl::StatusOr<int> RunVersion(CommandEnv& env);
absl::StatusOr<int> RunPresets(CommandEnv& env);
absl::StatusOr<int> RunCompletion(CommandEnv& env);
// For commands without flags of their own.
inline void DeclareNoFlags(FlagSet&) {}

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_COMMANDS_H_
