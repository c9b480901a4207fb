// The assumptions behind an estimate, one human-readable line each, so a user can see which
// constants and which reading of the spec produced the numbers.
#ifndef VRAMLAB_SERVER_ESTIMATE_ESTIMATE_NOTES_H_
#define VRAMLAB_SERVER_ESTIMATE_ESTIMATE_NOTES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

std::vector<std::string> EstimateNotes(const RunSettings& run, int64_t limit_bytes);

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_ESTIMATE_NOTES_H_
