#include "client/command_line.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/help_format.h"
#include "client/suggest.h"
#include "common/status_macros.h"

namespace vramlab::client {
namespace {

constexpr char kHelpSummary[] = "This help, or a command's: 'vramlab help COMMAND'.";

absl::StatusOr<const Command*> LookUpCommand(const std::string& name) {
  if (const Command* command = FindCommand(name)) return command;
  return absl::InvalidArgumentError(absl::StrCat("unknown command \"", name, "\"",
                                                 DidYouMean(name, CommandNames()),
                                                 " (run 'vramlab --help' for the list)"));
}

// `app` without CLI11's own --help/-h (the client declares its own, as a global flag).
CLI::App& WithoutHelpFlag(CLI::App& app) {
  app.set_help_flag();
  return app;
}

// The whole command line as one CLI::App. Owns the flag tables and the vectors CLI11 fills, so
// it is neither copied nor moved.
class CommandLineApp {
 public:
  CommandLineApp()
      : global_flags_(LeadingFlags()), global_options_(global_flags_, WithoutHelpFlag(root_)) {
    root_.allow_extras();  // unknown commands and flags are reported by Read, with suggestions
    root_.require_subcommand(0, 1);  // a command's positionals are never read as commands
    root_.formatter(std::make_shared<TopLevelHelpFormat>(TopLevelHelpIntro(), TopLevelHelpOutro()));
    for (const Command& command : AllCommands()) {
      auto entry = std::make_unique<Entry>(command);
      entry->app = root_.add_subcommand(command.name, entry->flags.summary());
      entry->app->set_help_flag();
      entry->app->fallthrough();  // global flags after the command
      entry->app->formatter(std::make_shared<HelpFormat>(command.usage));
      entry->options.emplace(entry->flags, *entry->app);
      entry->app->add_option("args", entry->positionals);
      commands_.push_back(std::move(entry));
    }
    help_ = root_.add_subcommand("help", kHelpSummary);
    help_->set_help_flag();
    help_->fallthrough();
    help_->add_option("command", help_names_);
  }
  CommandLineApp(const CommandLineApp&) = delete;
  CommandLineApp& operator=(const CommandLineApp&) = delete;

  absl::StatusOr<Invocation> Read(const std::vector<std::string>& args);

  std::string Help(const Command* command) {
    if (command == nullptr) return root_.help();
    for (const auto& entry : commands_) {
      if (&entry->command == command) return entry->app->help();
    }
    return root_.help();
  }

 private:
  struct Entry {
    explicit Entry(const Command& c) : command(c), flags(OwnFlags(c)) {}
    const Command& command;
    const FlagSet flags;
    CLI::App* app = nullptr;
    std::optional<FlagOptions> options;
    std::vector<std::string> positionals;
  };

  // `args` without a "--" that stands before the command ("vramlab -- ls"), which CLI11 would
  // read as the end of the top-level flags.
  std::vector<std::string> WithoutDashesBeforeCommand(const std::vector<std::string>& args) const;
  // Where the command's name stands in `args` (size() when absent).
  size_t CommandIndex(const std::vector<std::string>& args, const std::string& name) const;
  bool TakesValue(const std::string& arg) const;

  CLI::App root_;
  const FlagSet global_flags_;
  const FlagOptions global_options_;
  std::vector<std::unique_ptr<Entry>> commands_;
  CLI::App* help_ = nullptr;
  std::vector<std::string> help_names_;
};

bool CommandLineApp::TakesValue(const std::string& arg) const {
  if (!absl::StartsWith(arg, "--") || absl::StrContains(arg, '=')) return false;
  for (const FlagSet::Flag& flag : global_flags_.flags()) {
    if (arg == absl::StrCat("--", flag.name)) return !flag.value_name.empty();
  }
  return false;
}

std::vector<std::string> CommandLineApp::WithoutDashesBeforeCommand(
    const std::vector<std::string>& args) const {
  std::vector<std::string> out = args;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == "--") {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
    if (!absl::StartsWith(out[i], "-")) break;  // the command
    if (TakesValue(out[i])) ++i;
  }
  return out;
}

size_t CommandLineApp::CommandIndex(const std::vector<std::string>& args,
                                    const std::string& name) const {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) return i;
    if (TakesValue(args[i])) ++i;
  }
  return args.size();
}

absl::StatusOr<Invocation> CommandLineApp::Read(const std::vector<std::string>& given) {
  std::vector<std::string> args = WithoutDashesBeforeCommand(given);
  // Everything after a later "--" is positional; CLI11 hands it to the top level once the
  // command has a positional, so it is kept out of the parse.
  std::vector<std::string> after_dashes;
  if (auto dashes = std::find(args.begin(), args.end(), "--"); dashes != args.end()) {
    after_dashes.assign(dashes + 1, args.end());
    args.erase(dashes, args.end());
  }
  std::vector<const FlagSet*> tables = {&global_flags_};
  for (const auto& entry : commands_) tables.push_back(&entry->flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    root_.parse(reversed);
  } catch (const CLI::ArgumentMismatch& error) {
    return MissingValueError(error, tables);
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  Entry* selected = nullptr;
  for (const auto& entry : commands_) {
    if (entry->app->parsed()) selected = entry.get();
  }
  const bool help_command = help_->parsed();
  const std::string command_name = selected != nullptr ? selected->command.name
                                   : help_command      ? "help"
                                                       : "";
  const size_t command_at = CommandIndex(args, command_name);

  // What CLI11 left: unknown commands and unknown flags (where they stood decides the message).
  std::vector<std::string> remaining = root_.remaining();
  for (const auto& entry : commands_) {
    for (const std::string& arg : entry->app->remaining()) remaining.push_back(arg);
  }
  for (const std::string& arg : remaining) {
    if (arg == "--") continue;
    size_t at = 0;
    while (at < args.size() && args[at] != arg) ++at;
    if (!absl::StartsWith(arg, "-")) return LookUpCommand(arg).status();
    std::vector<std::string> known;
    const FlagSet& table = selected != nullptr && at > command_at ? selected->flags : global_flags_;
    for (const FlagSet::Flag& flag : table.flags()) known.push_back(flag.name);
    if (&table != &global_flags_) {
      for (const FlagSet::Flag& flag : global_flags_.flags()) known.push_back(flag.name);
    }
    const bool before_command = at < command_at || command_name.empty();
    absl::Status unknown = UnknownFlagError(
        arg, before_command ? global_flags_.usage() : selected->command.usage, known);
    if (before_command) {
      const std::string name = arg.substr(0, arg.find('='));
      const bool own_flag = [&] {
        for (const auto& entry : commands_) {
          for (const FlagSet::Flag& flag : entry->flags.flags()) {
            if (name == absl::StrCat("--", flag.name)) return true;
          }
        }
        return false;
      }();
      return absl::InvalidArgumentError(absl::StrCat(
          own_flag ? absl::StrCat("flag ", name, " is not a global one")
                   : std::string(unknown.message()),
          "; before the command only global flags are accepted (--json, --addr, --token, "
          "--ca-cert, --timeout, --config): put a command's own flags after it"));
    }
    return unknown;
  }

  Invocation invocation;
  RETURN_IF_ERROR(global_options_.Read(invocation.args));
  invocation.help = invocation.args.GetBool("help");
  if (help_command) {
    help_names_.insert(help_names_.end(), after_dashes.begin(), after_dashes.end());
    invocation.help = true;
    if (help_names_.size() > 1) {
      return absl::InvalidArgumentError("vramlab help takes at most one command name");
    }
    if (!help_names_.empty()) {
      ASSIGN_OR_RETURN(invocation.command, LookUpCommand(help_names_[0]));
    }
    return invocation;
  }
  if (selected == nullptr) {
    if (invocation.args.GetBool("version")) {
      invocation.command = FindCommand("version");
    } else if (!invocation.help) {
      return absl::InvalidArgumentError("no command given (run 'vramlab --help' for the list)");
    }
    return invocation;
  }
  invocation.command = &selected->command;
  selected->positionals.insert(selected->positionals.end(), after_dashes.begin(),
                               after_dashes.end());
  RETURN_IF_ERROR(selected->options->Read(invocation.args, &selected->positionals));
  return invocation;
}

}  // namespace

absl::StatusOr<Invocation> ReadCommandLine(const std::vector<std::string>& args) {
  CommandLineApp app;
  return app.Read(args);
}

std::string HelpText(const Command* command) {
  CommandLineApp app;
  return app.Help(command);
}

}  // namespace vramlab::client
