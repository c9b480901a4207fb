#include "client/command_line.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/suggest.h"

namespace vramlab::client {
namespace {

absl::StatusOr<const Command*> LookUpCommand(const std::string& name) {
  if (const Command* command = FindCommand(name)) return command;
  return absl::InvalidArgumentError(absl::StrCat("unknown command \"", name, "\"",
                                                 DidYouMean(name, CommandNames()),
                                                 " (run 'vramlab --help' for the list)"));
}

// The flags before the command in canonical form (--name=value), so they can be put in front of
// the command's own arguments whatever form they were given in.
std::vector<std::string> CanonicalFlags(const FlagSet& flags, const ParsedArgs& parsed) {
  std::vector<std::string> out;
  for (const FlagSet::Flag& flag : flags.flags()) {
    if (flag.name == "version" || flag.name == "help") continue;
    if (auto value = parsed.Get(flag.name))
      out.push_back(absl::StrCat("--", flag.name, "=", *value));
  }
  return out;
}

}  // namespace

absl::StatusOr<Invocation> ReadCommandLine(const std::vector<std::string>& args) {
  const FlagSet leading_flags = LeadingFlags();
  ParsedArgs leading;
  auto consumed = leading_flags.ParseLeading(args, leading);
  if (!consumed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        consumed.status().message(),
        "; before the command only global flags are accepted (--json, --addr, --token, "
        "--ca-cert, --timeout, --config): put a command's own flags after it"));
  }
  Invocation invocation;
  invocation.args = CanonicalFlags(leading_flags, leading);
  size_t next = *consumed;
  if (next < args.size() && args[next] == "--") ++next;  // "vramlab -- ls": the command follows
  if (next == args.size()) {
    if (leading.GetBool("version")) {
      invocation.command = FindCommand("version");
    } else if (leading.GetBool("help")) {
      invocation.help = true;
    } else {
      return absl::InvalidArgumentError("no command given (run 'vramlab --help' for the list)");
    }
    return invocation;
  }
  const std::string& name = args[next];
  if (name == "help") {
    invocation.help = true;
    if (next + 1 < args.size()) {
      auto command = LookUpCommand(args[next + 1]);
      if (!command.ok()) return command.status();
      invocation.command = *command;
    }
    if (next + 2 < args.size()) {
      return absl::InvalidArgumentError("vramlab help takes at most one command name");
    }
    return invocation;
  }
  auto command = LookUpCommand(name);
  if (!command.ok()) return command.status();
  invocation.command = *command;
  invocation.help = leading.GetBool("help");
  invocation.args.insert(invocation.args.end(), args.begin() + next + 1, args.end());
  return invocation;
}

}  // namespace vramlab::client
