// Experiment ids: "exp-" and six or more digits, made from the submission seq.
#ifndef VRAMLAB_SERVER_ENGINE_EXPERIMENT_ID_H_
#define VRAMLAB_SERVER_ENGINE_EXPERIMENT_ID_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vramlab::server {

std::string ExperimentIdOf(int64_t seq);

// INVALID_ARGUMENT naming `field` for an id that is empty, longer than 64 bytes or not printable
// ASCII: such an id is never looked up (the bound keeps a hostile id out of the store's queries
// and out of the error message that would echo it).
absl::Status CheckExperimentId(absl::string_view id, absl::string_view field = "id");

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_EXPERIMENT_ID_H_
