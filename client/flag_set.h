// Per-subcommand command-line parsing: each subcommand declares its flags in a FlagSet (the table
// that also feeds --help and the shell completion) and gets back a ParsedArgs. Parsing builds a
// CLI::App from the table and lets CLI11 read the command line; this class turns CLI11's errors
// into the client's messages (with the nearest known flag, which CLI11 does not suggest).
#ifndef VRAMLAB_CLIENT_FLAG_SET_H_
#define VRAMLAB_CLIENT_FLAG_SET_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vramlab::client {

// What a command line said. Flags are stored by their long name without dashes.
class ParsedArgs {
 public:
  bool Has(absl::string_view name) const { return values_.count(std::string(name)) > 0; }
  // The last value given for `name`, if any.
  std::optional<std::string> Get(absl::string_view name) const;
  // Every value given for `name`, in command-line order (a flag given more than once).
  std::vector<std::string> GetAll(absl::string_view name) const;
  // A boolean flag: true when given as --name or --name=true.
  bool GetBool(absl::string_view name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  friend class FlagSet;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::vector<std::string> positionals_;
};

class FlagSet {
 public:
  // `usage` is the synopsis after "vramlab " (e.g. "watch ID"); `summary` one sentence.
  FlagSet(std::string usage, std::string summary);

  // A flag that takes a value: --name VALUE or --name=VALUE.
  FlagSet& Value(std::string name, std::string value_name, std::string help);
  // A flag without a value: --name (or --name=true / --name=false).
  FlagSet& Bool(std::string name, std::string help);
  // A one-letter alias such as -o for --output.
  FlagSet& Alias(char short_name, std::string name);
  // The values the last declared value flag completes to in the shell (its own checks stay with
  // the command that reads it).
  FlagSet& Completes(std::vector<std::string> values);

  // Flags may come before, between or after positionals; "--" ends flag parsing. Unknown flags
  // (with the nearest known flag suggested), missing values and values given to boolean flags are
  // INVALID_ARGUMENT naming the flag.
  absl::StatusOr<ParsedArgs> Parse(const std::vector<std::string>& args) const;

  // Parses the flags at the front of `args` into `parsed`, stopping before the first positional or
  // "--" (neither is consumed); returns how many arguments were consumed. Errors as Parse.
  absl::StatusOr<size_t> ParseLeading(const std::vector<std::string>& args,
                                      ParsedArgs& parsed) const;

  // The --help text: usage, summary and one line per flag, in declaration order.
  std::string Help() const;

  struct Flag {
    std::string name;
    std::string value_name;  // empty for boolean flags
    std::string help;
    std::vector<std::string> completions;  // set by Completes(); empty: derived from the help
  };
  // In declaration order.
  const std::vector<Flag>& flags() const { return flags_; }
  // One-letter alias -> long name.
  const std::map<char, std::string>& aliases() const { return aliases_; }
  const std::string& usage() const { return usage_; }
  const std::string& summary() const { return summary_; }

 private:
  const Flag* Find(absl::string_view name) const;
  // Parses args[0..] into `parsed`; with `stop_at_positional`, returns at the first positional or
  // "--" instead of collecting it. Returns the index where parsing stopped.
  absl::StatusOr<size_t> ParseInto(const std::vector<std::string>& args, bool stop_at_positional,
                                   ParsedArgs& parsed) const;

  std::string usage_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::map<char, std::string> aliases_;
};

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FLAG_SET_H_
