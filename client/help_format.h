// The client's --help texts as CLI11 formatters: CLI::App::help() of a command's App renders
// "usage: vramlab USAGE", its description and one line per flag (its own, then the global flags
// its parent App declares); the top-level App renders the command list.
#ifndef VRAMLAB_CLIENT_HELP_FORMAT_H_
#define VRAMLAB_CLIENT_HELP_FORMAT_H_

#include <string>

#include "CLI/CLI.hpp"

namespace vramlab::client {

class HelpFormat : public CLI::Formatter {
 public:
  // `usage`: the synopsis after "vramlab " (e.g. "watch ID").
  explicit HelpFormat(std::string usage) : usage_(std::move(usage)) {}

  // The App's own options in declaration order, then its parent's (but --version), each as
  // "-o, --output FILE  help" in aligned columns; positionals are in the usage line.
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override;

 private:
  std::string usage_;
};

class TopLevelHelpFormat : public CLI::Formatter {
 public:
  // `intro` goes before the command list, `outro` after it.
  TopLevelHelpFormat(std::string intro, std::string outro)
      : intro_(std::move(intro)), outro_(std::move(outro)) {}

  // `intro`, then "  NAME  SUMMARY" for each subcommand in declaration order (the summary is the
  // description up to its first blank line), then `outro`.
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override;

 private:
  std::string intro_;
  std::string outro_;
};

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_HELP_FORMAT_H_
