#include "client/flag_set.h"

#include <algorithm>
#include <utility>

#include "CLI/CLI.hpp"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/help_format.h"
#include "client/suggest.h"
#include "common/status_macros.h"

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

FlagSet& FlagSet::Env(std::string variable) {
  if (!flags_.empty()) flags_.back().env = std::move(variable);
  return *this;
}

FlagOptions::FlagOptions(const FlagSet& flags, CLI::App& app) {
  for (const FlagSet::Flag& flag : flags.flags()) {
    std::string names = absl::StrCat("--", flag.name);
    for (const auto& [short_name, long_name] : flags.aliases()) {
      if (long_name == flag.name) absl::StrAppend(&names, ",-", std::string(1, short_name));
    }
    CLI::Option* option =
        flag.value_name.empty()
            ? app.add_flag(names, flag.help)
            : app.add_option(names, flag.help)->expected(1)->type_name(flag.value_name);
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    if (!flag.env.empty()) option->envname(flag.env);
    options_.emplace_back(&flag, option);
  }
}

absl::Status FlagOptions::Read(ParsedArgs& parsed,
                               const std::vector<std::string>* positionals) const {
  if (positionals != nullptr) {
    parsed.positionals_.insert(parsed.positionals_.end(), positionals->begin(), positionals->end());
  }
  for (const auto& [flag, option] : options_) {
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
  return absl::OkStatus();
}

absl::Status UnknownFlagError(const std::string& arg, const std::string& usage,
                              const std::vector<std::string>& known) {
  if (!absl::StartsWith(arg, "--")) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flag ", arg, " for \"vramlab ", usage, "\" (see --help)"));
  }
  const size_t equals = arg.find('=');
  const std::string name = arg.substr(2, equals == std::string::npos ? equals : equals - 2);
  return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " for \"vramlab ", usage,
                                                 "\"", DidYouMean(name, known, "--"),
                                                 " (see --help)"));
}

absl::Status MissingValueError(const CLI::ParseError& error,
                               const std::vector<const FlagSet*>& tables) {
  // "--output: 1 required TEXT missing": a value flag at the end of the line.
  const std::string what = error.what();
  const std::string name = what.substr(0, what.find(':'));
  for (const FlagSet* table : tables) {
    for (const FlagSet::Flag& flag : table->flags()) {
      if (absl::StrCat("--", flag.name) == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", name, " needs a value (", flag.value_name, ")"));
      }
    }
  }
  return absl::InvalidArgumentError(what);
}

absl::StatusOr<ParsedArgs> FlagSet::Parse(const std::vector<std::string>& args) const {
  CLI::App app;
  app.set_help_flag();
  app.allow_extras();
  const FlagOptions options(*this, app);
  std::vector<std::string> positionals;
  app.add_option("args", positionals);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& error) {
    return MissingValueError(error, {this});
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  std::vector<std::string> known;
  for (const Flag& flag : flags_) known.push_back(flag.name);
  for (const std::string& arg : app.remaining()) {
    if (arg == "--") continue;  // the end of the flags, kept by CLI11 as an extra
    return UnknownFlagError(arg, usage_, known);
  }
  ParsedArgs parsed;
  RETURN_IF_ERROR(options.Read(parsed, &positionals));
  return parsed;
}

std::string FlagSet::Help() const {
  CLI::App app(summary_);
  app.set_help_flag();
  const FlagOptions options(*this, app);
  app.formatter(std::make_shared<HelpFormat>(usage_));
  return app.help();
}

}  // namespace vramlab::client
