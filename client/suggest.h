// "Did you mean ...?" for mistyped commands and flags.
#ifndef VRAMLAB_CLIENT_SUGGEST_H_
#define VRAMLAB_CLIENT_SUGGEST_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace vramlab::client {

// The optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two
// adjacent characters each cost 1 ("sumbit" is 1 away from "submit").
int EditDistance(absl::string_view a, absl::string_view b);

// The candidate `word` was most likely meant to be: the nearest one within distance 2 (1 for words
// of up to 3 characters, so short words are not matched to anything), else the only candidate that
// starts with `word`. Ties go to the earlier candidate. nullopt when none is close, when `word`
// is a single character (too little to guess from), or when `word` is itself a candidate.
std::optional<std::string> ClosestMatch(absl::string_view word,
                                        const std::vector<std::string>& candidates);

// " (did you mean \"X\"?)" with X = `prefix` + the closest match, or "" when there is none.
std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates,
                       absl::string_view prefix = "");

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_SUGGEST_H_
