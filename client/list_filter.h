// The experiment filters `ls` and `cancel` share: --state (a comma list, and/or repeated) and
// --owner, read into a ListExperimentsRequest, and paging through every match.
#ifndef VRAMLAB_CLIENT_LIST_FILTER_H_
#define VRAMLAB_CLIENT_LIST_FILTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/daemon_client.h"
#include "vramlab/v1/service.pb.h"

namespace vramlab::client {

// Adds the states named in `values` ("queued,running", each value a comma list, case-insensitive)
// to `request`. An unknown state is INVALID_ARGUMENT naming --state, the nearest state and all.
absl::Status AddStateFilter(const std::vector<std::string>& values,
                            vramlab::v1::ListExperimentsRequest& request);

// Every experiment matching `request`, newest first, at most `limit` of them (0: all), fetched a
// page of up to 1000 at a time.
absl::StatusOr<vramlab::v1::ListExperimentsResponse> ListMatching(
    DaemonClient& client, vramlab::v1::ListExperimentsRequest request, int32_t limit);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_LIST_FILTER_H_
