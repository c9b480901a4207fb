#include "client/flag_set.h"

#include <algorithm>
#include <utility>

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
  bool flags_ended = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool positional = flags_ended || arg == "-" || !absl::StartsWith(arg, "-");
    if (stop_at_positional && (positional || arg == "--")) return i;
    if (positional) {
      parsed.positionals_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      continue;
    }
    std::string name;
    std::optional<std::string> inline_value;
    if (absl::StartsWith(arg, "--")) {
      name = arg.substr(2);
      const size_t equals = name.find('=');
      if (equals != std::string::npos) {
        inline_value = name.substr(equals + 1);
        name.resize(equals);
      }
    } else if (arg.size() == 2 && aliases_.count(arg[1]) > 0) {
      name = aliases_.at(arg[1]);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg, " for \"vramlab ", usage_, "\" (see --help)"));
    }
    const Flag* flag = Find(name);
    if (flag == nullptr) {
      std::vector<std::string> names;
      for (const Flag& known : flags_) names.push_back(known.name);
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " for \"vramlab ",
                                                     usage_, "\"", DidYouMean(name, names, "--"),
                                                     " (see --help)"));
    }
    if (flag->value_name.empty()) {
      if (inline_value.has_value() && *inline_value != "true" && *inline_value != "false") {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --", name, " takes no value (or =true/=false), got \"", *inline_value, "\""));
      }
      parsed.values_[name] = inline_value.value_or("true");
      continue;
    }
    if (inline_value.has_value()) {
      parsed.values_[name] = *inline_value;
    } else if (i + 1 < args.size()) {
      parsed.values_[name] = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " needs a value (", flag->value_name, ")"));
    }
    parsed.all_values_[name].push_back(parsed.values_[name]);
  }
  return i;
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
