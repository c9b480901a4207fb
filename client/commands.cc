#include "client/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/connection_options.h"

namespace vramlab::client {

const std::vector<Command>& AllCommands() {
  static const auto* commands = new std::vector<Command>{
      {"submit", "submit [--spec FILE] [flags]",
       "Queue an experiment and print its id (--wait to block, --watch to follow it live).",
       DeclareSubmitFlags, RunSubmit},
      {"watch", "watch ID", "Follow an experiment live; exit code tells the outcome.",
       DeclareWatchFlags, RunWatch},
      {"ls", "ls [--state S,...] [--owner USER] [--limit N]",
       "List experiments, newest first.", DeclareListFlags, RunList},
      {"show", "show ID", "Everything about one experiment: settings, outcome, anatomy.",
       DeclareNoFlags, RunShow},
      {"logs", "logs ID", "Print the worker's log (stderr) of an experiment.", DeclareNoFlags,
       RunLogs},
      {"cancel", "cancel ID", "Cancel a queued or running experiment.", DeclareNoFlags, RunCancel},
      {"snapshot", "snapshot ID -o FILE",
       "Download the allocator snapshot for PyTorch's memory viewer (pytorch.org/memory_viz).",
       DeclareSnapshotFlags, RunSnapshot},
      {"compare", "compare ID ID...",
       "Side-by-side anatomy of experiments, with each one's difference to the first.",
       DeclareNoFlags, RunCompare},
      {"report", "report ID [--format text|json|csv|svg|html] [-o FILE]",
       "Memory timeline with phase bands and the peak, and the anatomy as a stacked bar.",
       DeclareReportFlags, RunReport},
      {"estimate", "estimate [--spec FILE] [flags]",
       "The daemon's predicted anatomy of a spec, without running it.", DeclareEstimateFlags,
       RunEstimate},
      {"server", "server [--health]",
       "Daemon version, GPUs (slots), queue and limits; exit 0 if it answers.",
       DeclareServerFlags, RunServer},
  };
  return *commands;
}

FlagSet CommandFlags(const Command& command) {
  FlagSet flags(command.usage, command.summary);
  command.declare_flags(flags);
  flags.Bool("json", "print protobuf JSON instead of text");
  AddConnectionFlags(flags);
  flags.Bool("help", "show this help").Alias('h', "help");
  return flags;
}

std::string TopLevelHelp() {
  std::string out =
      "vramlab: the client of vramlabd, the GPU-memory laboratory for LLM fine-tuning.\n\n"
      "usage: vramlab COMMAND [ARGS] [FLAGS]\n\ncommands:\n";
  for (const auto& command : AllCommands()) {
    absl::StrAppendFormat(&out, "  %-9s %s\n", command.name, command.summary);
  }
  absl::StrAppend(
      &out,
      "\nEvery command takes --json, --addr HOST:PORT (VRAMLAB_ADDR), --token (VRAMLAB_TOKEN),\n"
      "--ca-cert FILE and --timeout; defaults may live in $XDG_CONFIG_HOME/vramlab/config.\n"
      "Run 'vramlab COMMAND --help' for a command's flags. Exit codes: 0 ok/succeeded,\n"
      "1 failed, 2 usage, 3 OOM, 4 cancelled, 5 interrupted, 6 daemon unreachable/RPC error.\n");
  return out;
}

}  // namespace vramlab::client
