#include "client/config_file.h"

#include <algorithm>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vramlab::client {

const std::vector<std::string>& ConfigFileKeys() {
  static const auto* keys = new std::vector<std::string>{"addr", "token", "ca-cert"};
  return *keys;
}

std::vector<CLI::ConfigItem> ConfigFileFormat::from_config(std::istream& input) const {
  std::vector<CLI::ConfigItem> items;
  std::string raw_line;
  int line_number = 0;
  while (std::getline(input, raw_line)) {
    ++line_number;
    const absl::string_view line = absl::StripAsciiWhitespace(raw_line);
    if (line.empty() || line.front() == '#') continue;
    const size_t separator = line.find_first_of("=:");
    if (separator == absl::string_view::npos) {
      throw CLI::ParseError(absl::StrCat(origin_, ":", line_number, ": expected \"key = value\""),
                            CLI::ExitCodes::ConversionError);
    }
    std::string key(absl::StripAsciiWhitespace(line.substr(0, separator)));
    std::string value(absl::StripAsciiWhitespace(line.substr(separator + 1)));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    const std::vector<std::string>& keys = ConfigFileKeys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      throw CLI::ParseError(absl::StrCat(origin_, ":", line_number, ": unknown key \"", key,
                                         "\" (known: ", absl::StrJoin(keys, ", "), ")"),
                            CLI::ExitCodes::ConversionError);
    }
    CLI::ConfigItem item;
    item.name = std::move(key);
    item.inputs = {std::move(value)};
    items.push_back(std::move(item));
  }
  return items;
}

std::string ConfigFileFormat::to_config(const CLI::App* app, bool default_also,
                                        bool /*write_description*/, std::string /*prefix*/) const {
  std::string out;
  for (const std::string& key : ConfigFileKeys()) {
    const CLI::Option* option = app->get_option_no_throw(absl::StrCat("--", key));
    if (option == nullptr) continue;
    if (option->count() > 0) {
      absl::StrAppend(&out, key, " = ", option->results().back(), "\n");
    } else if (default_also && !option->get_default_str().empty()) {
      absl::StrAppend(&out, key, " = ", option->get_default_str(), "\n");
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ParseConfigFile(absl::string_view text,
                                                                   absl::string_view origin) {
  std::istringstream input{std::string(text)};
  std::map<std::string, std::string> values;
  try {
    for (const CLI::ConfigItem& item : ConfigFileFormat(std::string(origin)).from_config(input)) {
      values[item.name] = item.inputs.front();
    }
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  return values;
}

}  // namespace vramlab::client
