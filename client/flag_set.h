// The flags of a command as a table: each command declares its flags in a FlagSet (the table that
// also feeds the shell completion), which becomes the options of its CLI::App (command_line.h
// builds the whole command line from these tables; Parse reads one table alone). This class turns
// CLI11's results into a ParsedArgs and its errors into the client's messages (with the nearest
// known flag, which CLI11 does not suggest).
#ifndef VRAMLAB_CLIENT_FLAG_SET_H_
#define VRAMLAB_CLIENT_FLAG_SET_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace CLI {
class App;
class Option;
class ParseError;
}  // namespace CLI

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
  friend class FlagOptions;
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
  // The environment variable the last declared value flag falls back to when the command line
  // does not give it (read by CLI11; an empty value counts as unset).
  FlagSet& Env(std::string variable);

  // Flags may come before, between or after positionals; "--" ends flag parsing. Unknown flags
  // (with the nearest known flag suggested), missing values and values given to boolean flags are
  // INVALID_ARGUMENT naming the flag.
  absl::StatusOr<ParsedArgs> Parse(const std::vector<std::string>& args) const;

  // The --help text (help_format.h): usage, summary and one line per flag, in declaration order.
  std::string Help() const;

  struct Flag {
    std::string name;
    std::string value_name;  // empty for boolean flags
    std::string help;
    std::vector<std::string> completions;  // set by Completes(); empty: derived from the help
    std::string env;                       // set by Env(); empty: none
  };
  // In declaration order.
  const std::vector<Flag>& flags() const { return flags_; }
  // One-letter alias -> long name.
  const std::map<char, std::string>& aliases() const { return aliases_; }
  const std::string& usage() const { return usage_; }
  const std::string& summary() const { return summary_; }

 private:
  const Flag* Find(absl::string_view name) const;
  std::string usage_;
  std::string summary_;
  std::vector<Flag> flags_;
  std::map<char, std::string> aliases_;
};

// The flags of one FlagSet declared as options of a CLI::App (value flags take one argument per
// occurrence and keep every occurrence; boolean flags are CLI11 flags; aliases, value names and
// environment variables as declared), and read back after the App has parsed. The FlagSet must
// outlive this object, and the App must outlive Read.
class FlagOptions {
 public:
  FlagOptions(const FlagSet& flags, CLI::App& app);

  // Copies what CLI11 parsed (from the command line or the environment) into `parsed`, and the
  // `positionals` where given. A boolean flag given a value other than true or false is
  // INVALID_ARGUMENT naming it.
  absl::Status Read(ParsedArgs& parsed,
                    const std::vector<std::string>* positionals = nullptr) const;

 private:
  std::vector<std::pair<const FlagSet::Flag*, CLI::Option*>> options_;
};

// "unknown flag ARG for "vramlab USAGE" (see --help)", with the nearest of `known` (long names
// without dashes) suggested for a long flag.
absl::Status UnknownFlagError(const std::string& arg, const std::string& usage,
                              const std::vector<std::string>& known);

// CLI11's error for a value flag without its value, as "flag --NAME needs a value (VALUE)" where
// one of `tables` declares the flag; CLI11's own text otherwise.
absl::Status MissingValueError(const CLI::ParseError& error,
                               const std::vector<const FlagSet*>& tables);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_FLAG_SET_H_
