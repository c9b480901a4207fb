#include "client/commands.h"

#include "absl/strings/str_cat.h"
#include "client/connection_options.h"

namespace vramlab::client {

const std::vector<Command>& AllCommands() {
  static const auto* commands = new std::vector<Command>{
      {"submit", "submit [--spec FILE] [flags]",
       "Queue an experiment and print its id (--wait to block, --watch to follow it live).",
       DeclareSubmitFlags, RunSubmit},
      {"watch", "watch ID", "Follow an experiment live; exit code tells the outcome.",
       DeclareWatchFlags, RunWatch},
      {"ls", "ls [--state S,...] [--owner USER] [--limit N]", "List experiments, newest first.",
       DeclareListFlags, RunList},
      {"show", "show ID", "Everything about one experiment: settings, outcome, anatomy.",
       DeclareNoFlags, RunShow},
      {"logs", "logs ID [--follow]",
       "Print the worker's log (stderr) of an experiment (--follow: until it ends).",
       DeclareLogsFlags, RunLogs},
      {"cancel", "cancel [ID...] [--mine] [--owner USER] [--state S,...]",
       "Cancel queued or running experiments, by ID or every one a filter matches.",
       DeclareCancelFlags, RunCancel},
      {"update", "update ID... [--priority P] [--time-limit D] [--name NAME]",
       "Change the priority, time limit or name of queued experiments.", DeclareUpdateFlags,
       RunUpdate},
      {"hold", "hold ID...", "Keep queued experiments from starting (they keep their place).",
       DeclareNoFlags, RunHold},
      {"release", "release ID...", "Let held experiments start again.", DeclareNoFlags, RunRelease},
      {"delete", "delete ID...",
       "Delete finished experiments: record, events, log and snapshot (cancel running ones first).",
       DeclareNoFlags, RunDelete},
      {"snapshot", "snapshot ID -o FILE",
       "Download the allocator snapshot for PyTorch's memory viewer (pytorch.org/memory_viz).",
       DeclareSnapshotFlags, RunSnapshot},
      {"compare", "compare ID ID...",
       "Side-by-side anatomy of experiments, with each one's difference to the first.",
       DeclareNoFlags, RunCompare},
      {"report", "report ID [--format text|json|csv|svg|html|perfetto] [-o FILE]",
       "Memory timeline with phase bands and the peak, and the anatomy as a stacked bar.",
       DeclareReportFlags, RunReport},
      {"estimate", "estimate [--spec FILE] [flags]",
       "The daemon's predicted anatomy of a spec, without running it.", DeclareEstimateFlags,
       RunEstimate},
      {"server", "server [--health]",
       "Daemon version, GPUs (slots), queue and limits; exit 0 if it answers.", DeclareServerFlags,
       RunServer},
      {"completion", "completion bash|zsh",
       "Print a shell completion script (install: see 'vramlab help completion').", DeclareNoFlags,
       RunCompletion, /*local=*/true,
       "Completes commands, flags, flag values (files, presets, fixed choices) and experiment ids "
       "(from\n"
       "'vramlab ls' against the daemon the command line names). Install for bash:\n"
       "  vramlab completion bash > ~/.local/share/bash-completion/completions/vramlab\n"
       "or for zsh, into a directory of $fpath before compinit runs:\n"
       "  vramlab completion zsh > ~/.zfunc/_vramlab   # with fpath=(~/.zfunc $fpath) in ~/.zshrc\n"
       "or load it in the running shell: source <(vramlab completion bash)   (zsh: after "
       "compinit)\n"
       "The deb package installs both system-wide."},
      {"version", "version", "The client's version (with --json: as JSON).", DeclareNoFlags,
       RunVersion, /*local=*/true},
      {"presets", "presets",
       "The model presets: family, parameter count, shapes and features (with --json: as JSON).",
       DeclareNoFlags, RunPresets, /*local=*/true},
  };
  return *commands;
}

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (const Command& command : AllCommands()) names.push_back(command.name);
  names.push_back("help");
  return names;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : AllCommands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

void AddGlobalFlags(FlagSet& flags) {
  flags.Bool("json", "print protobuf JSON instead of text");
  AddConnectionFlags(flags);
  flags.Bool("help", "show this help").Alias('h', "help");
}

FlagSet OwnFlags(const Command& command) {
  FlagSet flags(command.usage, command.details == nullptr
                                   ? std::string(command.summary)
                                   : absl::StrCat(command.summary, "\n\n", command.details));
  command.declare_flags(flags);
  return flags;
}

FlagSet CommandFlags(const Command& command) {
  FlagSet flags = OwnFlags(command);
  AddGlobalFlags(flags);
  return flags;
}

FlagSet LeadingFlags() {
  FlagSet flags("[GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]",
                "Global flags may come before the command as well as after it.");
  AddGlobalFlags(flags);
  flags.Bool("version", "print the client's version");
  return flags;
}

std::string TopLevelHelpIntro() {
  return "vramlab: the client of vramlabd, the GPU-memory laboratory for LLM fine-tuning.\n\n"
         "usage: vramlab [GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]\n\ncommands:\n";
}

std::string TopLevelHelpOutro() {
  return "\nEvery command takes --json, --addr HOST:PORT (VRAMLAB_ADDR), --token (VRAMLAB_TOKEN),\n"
         "--ca-cert FILE, --timeout and --config, before or after the command; defaults may live "
         "in\n"
         "$XDG_CONFIG_HOME/vramlab/config. 'vramlab help COMMAND' (or 'vramlab COMMAND --help') "
         "shows\n"
         "a command's flags. Exit codes: 0 ok/succeeded, 1 failed, 2 usage, 3 OOM, 4 cancelled,\n"
         "5 interrupted, 6 daemon unreachable/RPC error.\n";
}

}  // namespace vramlab::client
