#include "client/help_format.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vramlab::client {
namespace {

// "-o, --output FILE", or "    --wait" for a flag without a short name or value.
std::string FlagColumn(const CLI::Option& option) {
  std::string left =
      option.get_snames().empty() ? "    --" : absl::StrCat("-", option.get_snames()[0], ", --");
  absl::StrAppend(&left, option.get_lnames().empty() ? "" : option.get_lnames()[0]);
  if (option.get_items_expected_max() > 0) absl::StrAppend(&left, " ", option.get_type_name());
  return left;
}

}  // namespace

std::string HelpFormat::make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const {
  std::string out = absl::StrCat("usage: vramlab ", usage_, "\n\n", app->get_description(), "\n");
  const auto shown = [](const CLI::Option* option) {
    return !option->get_lnames().empty() && option->get_lnames()[0] != "version";
  };
  std::vector<const CLI::Option*> options = app->get_options(shown);
  if (const CLI::App* parent = app->get_parent(); parent != nullptr) {
    for (const CLI::Option* option : parent->get_options(shown)) options.push_back(option);
  }
  if (options.empty()) return out;
  absl::StrAppend(&out, "\nflags:\n");
  std::vector<std::string> lefts;
  size_t width = 0;
  for (const CLI::Option* option : options) {
    lefts.push_back(FlagColumn(*option));
    width = std::max(width, lefts.back().size());
  }
  for (size_t i = 0; i < options.size(); ++i) {
    absl::StrAppendFormat(&out, "  %-*s  %s\n", static_cast<int>(width), lefts[i],
                          options[i]->get_description());
  }
  return out;
}

std::string TopLevelHelpFormat::make_help(const CLI::App* app, std::string,
                                          CLI::AppFormatMode) const {
  std::string out = intro_;
  for (const CLI::App* command : app->get_subcommands([](const CLI::App*) { return true; })) {
    const std::string& description = command->get_description();
    absl::StrAppendFormat(&out, "  %-10s  %s\n", command->get_name(),
                          description.substr(0, description.find("\n\n")));
  }
  return out + outro_;
}

}  // namespace vramlab::client
