// Shell completion scripts for vramlab, generated from the command table and each command's
// flags, so they never fall behind the binary.
#ifndef VRAMLAB_CLIENT_COMPLETION_H_
#define VRAMLAB_CLIENT_COMPLETION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/flag_set.h"

namespace vramlab::client {

// What a flag's value completes to.
struct ValueCompletion {
  enum Kind { kNone, kFile, kDirectory, kChoices };
  Kind kind = kNone;
  std::vector<std::string> choices;  // kChoices only
};

// A flag declared with FlagSet::Completes() completes to those values; else FILE values complete
// to files, DIR values to directories, and a flag whose help starts with "a|b|c" to those words;
// other values (numbers, names, sizes) to nothing.
ValueCompletion CompletionOfValue(const FlagSet::Flag& flag);

// The completion script for `shell` ("bash" or "zsh"); INVALID_ARGUMENT naming the shells
// otherwise. Positional experiment IDs complete to the ids `vramlab ls` prints (with the
// connection flags already on the command line).
absl::StatusOr<std::string> CompletionScript(absl::string_view shell);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_COMPLETION_H_
