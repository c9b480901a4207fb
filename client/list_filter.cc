#include "client/list_filter.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/suggest.h"
#include "common/status_macros.h"

namespace vramlab::client {

using vramlab::v1::Experiment;

absl::Status AddStateFilter(const std::vector<std::string>& values,
                            vramlab::v1::ListExperimentsRequest& request) {
  static const std::vector<std::string> kNames = {"queued", "running",   "succeeded",  "oom",
                                                  "failed", "cancelled", "interrupted"};
  for (const std::string& value : values) {
    for (absl::string_view word : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(word));
      Experiment::State state;
      if (!Experiment::State_Parse(absl::AsciiStrToUpper(name), &state) ||
          state == Experiment::STATE_UNSPECIFIED) {
        return absl::InvalidArgumentError(absl::StrCat("--state: unknown state \"", word, "\"",
                                                       DidYouMean(name, kNames),
                                                       " (queued, running, succeeded, oom, "
                                                       "failed, cancelled, interrupted)"));
      }
      request.add_states(state);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<vramlab::v1::ListExperimentsResponse> ListMatching(
    DaemonClient& client, vramlab::v1::ListExperimentsRequest request, int32_t limit) {
  vramlab::v1::ListExperimentsResponse all;
  do {
    const int remaining = limit == 0 ? 1000 : limit - all.experiments_size();
    request.set_page_size(std::min(remaining, 1000));
    ASSIGN_OR_RETURN(vramlab::v1::ListExperimentsResponse page, client.List(request));
    for (auto& e : *page.mutable_experiments()) {
      if (limit != 0 && all.experiments_size() >= limit) break;
      *all.add_experiments() = std::move(e);
    }
    request.set_page_token(page.next_page_token());
    all.set_next_page_token(page.next_page_token());
  } while (!request.page_token().empty() && (limit == 0 || all.experiments_size() < limit));
  return all;
}

}  // namespace vramlab::client
