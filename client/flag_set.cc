#include "client/flag_set.h"

#include <algorithm>
#include <utility>

#include "CLI/CLI.hpp"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/suggest.h"

namespace vramlab::client {

std::optional<std::string> ParsedArgs::Get(absl::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ParsedArgs::GetAll(absl::string_view name) const {
  auto it = all_values_.find(std::string(name));
  if (it == all_values_.end()) return {};
  return it->second;
}

bool ParsedArgs::GetBool(absl::string_view name) const {
  auto value = Get(name);
  return value.has_value() && *value == "true";
}

FlagSet::FlagSet(std::string usage, std::string summary)
    : usage_(std::move(usage)), summary_(std::move(summary)) {}

FlagSet& FlagSet::Value(std::string name, std::string value_name, std::string help) {
  flags_.push_back({std::move(name), std::move(value_name), std::move(help), {}});
  return *this;
}

FlagSet& FlagSet::Bool(std::string name, std::string help) {
  flags_.push_back({std::move(name), "", std::move(help), {}});
  return *this;
}

FlagSet& FlagSet::Alias(char short_name, std::string name) {
  aliases_[short_name] = std::move(name);
  return *this;
}

FlagSet& FlagSet::Completes(std::vector<std::string> values) {
  if (!flags_.empty()) flags_.back().completions = std::move(values);
  return *this;
}

const FlagSet::Flag* FlagSet::Find(absl::string_view name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

absl::StatusOr<ParsedArgs> FlagSet::Parse(const std::vector<std::string>& args) const {
  ParsedArgs parsed;
  auto consumed = ParseInto(args, /*stop_at_positional=*/false, parsed);
  if (!consumed.ok()) return consumed.status();
  return parsed;
}

absl::StatusOr<size_t> FlagSet::ParseLeading(const std::vector<std::string>& args,
                                             ParsedArgs& parsed) const {
  return ParseInto(args, /*stop_at_positional=*/true, parsed);
}

absl::StatusOr<size_t> FlagSet::ParseInto(const std::vector<std::string>& args,
                                          bool stop_at_positional, ParsedArgs& parsed) const {
  // The table becomes a CLI::App: value flags take exactly one argument per occurrence and keep
  // every occurrence; boolean flags are CLI11 flags, whose "=VALUE" this adapter restricts to
  // true/false. Unknown flags are collected as extras (CLI11 has no did-you-mean) and reported
  // here with the nearest known flag.
  CLI::App app;
  app.set_help_flag();
  app.allow_extras();
  std::vector<std::pair<const Flag*, CLI::Option*>> options;
  for (const Flag& flag : flags_) {
    std::string names = absl::StrCat("--", flag.name);
    for (const auto& [short_name, long_name] : aliases_) {
      if (long_name == flag.name) absl::StrAppend(&names, ",-", std::string(1, short_name));
    }
    CLI::Option* option = flag.value_name.empty() ? app.add_flag(names, flag.help)
                                                  : app.add_option(names, flag.help)->expected(1);
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    options.emplace_back(&flag, option);
  }
  std::vector<std::string> positionals;
  if (stop_at_positional) {
    app.prefix_command();  // the first positional and everything after it are left unparsed
  } else {
    app.add_option("args", positionals);
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& error) {
    // "--output: 1 required TEXT missing": a value flag at the end of the line.
    const std::string what = error.what();
    const std::string name = what.substr(0, what.find(':'));
    for (const Flag& flag : flags_) {
      if (absl::StrCat("--", flag.name) == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", name, " needs a value (", flag.value_name, ")"));
      }
    }
    return absl::InvalidArgumentError(what);
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  // With prefix_command the unparsed tail starts at the first positional or "--"; anything else
  // CLI11 left over is a flag it does not know.
  std::vector<std::string> rest = app.remaining();
  size_t consumed = args.size();
  if (stop_at_positional && !rest.empty()) {
    const std::string& first = rest.front();
    if (first == "--" || first == "-" || !absl::StartsWith(first, "-")) {
      consumed = args.size() - rest.size();
      rest.clear();
    }
  }
  for (const std::string& arg : rest) {
    if (arg == "--") continue;  // the end of the flags, kept by CLI11 as an extra
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg, " for \"vramlab ", usage_, "\" (see --help)"));
    }
    const std::string name =
        arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    std::vector<std::string> names;
    for (const Flag& known : flags_) names.push_back(known.name);
    return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " for \"vramlab ",
                                                   usage_, "\"", DidYouMean(name, names, "--"),
                                                   " (see --help)"));
  }
  for (const auto& [flag, option] : options) {
    for (const std::string& value : option->results()) {
      if (flag->value_name.empty()) {
        if (value != "true" && value != "false") {
          return absl::InvalidArgumentError(absl::StrCat(
              "flag --", flag->name, " takes no value (or =true/=false), got \"", value, "\""));
        }
      } else {
        parsed.all_values_[flag->name].push_back(value);
      }
      parsed.values_[flag->name] = value;
    }
  }
  parsed.positionals_.insert(parsed.positionals_.end(), positionals.begin(), positionals.end());
  return consumed;
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat("usage: vramlab ", usage_, "\n\n", summary_, "\n");
  if (flags_.empty()) return out;
  absl::StrAppend(&out, "\nflags:\n");
  std::map<std::string, char> short_names;
  for (const auto& [short_name, name] : aliases_) short_names[name] = short_name;
  size_t width = 0;
  std::vector<std::string> lefts;
  for (const Flag& flag : flags_) {
    std::string left = short_names.count(flag.name) > 0
                           ? absl::StrCat("-", std::string(1, short_names[flag.name]), ", --")
                           : "    --";
    absl::StrAppend(&left, flag.name);
    if (!flag.value_name.empty()) absl::StrAppend(&left, " ", flag.value_name);
    width = std::max(width, left.size());
    lefts.push_back(std::move(left));
  }
  for (size_t i = 0; i < flags_.size(); ++i) {
    absl::StrAppendFormat(&out, "  %-*s  %s\n", static_cast<int>(width), lefts[i], flags_[i].help);
  }
  return out;
}

}  // namespace vramlab::client
