#include "server/engine/experiment_id.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vramlab::server {

namespace {
constexpr size_t kMaxIdBytes = 64;
}  // namespace

std::string ExperimentIdOf(int64_t seq) { return absl::StrFormat("exp-%06d", seq); }

absl::Status CheckExperimentId(absl::string_view id, absl::string_view field) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  if (id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": at most ", kMaxIdBytes, " bytes, got ", id.size()));
  }
  for (unsigned char c : id) {
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": printable ASCII only (an id looks like exp-000042)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace vramlab::server
