#include "server/spec/alloc_conf.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vramlab::server {

std::string AllocatorConfString(const vramlab::v1::AllocatorConfig& config) {
  std::vector<std::string> parts;
  if (config.expandable_segments()) parts.push_back("expandable_segments:True");
  if (config.max_split_size_mb() > 0) {
    parts.push_back(absl::StrCat("max_split_size_mb:", config.max_split_size_mb()));
  }
  if (config.garbage_collection_threshold() > 0) {
    parts.push_back(
        absl::StrCat("garbage_collection_threshold:", config.garbage_collection_threshold()));
  }
  if (!config.extra().empty()) parts.push_back(config.extra());
  return absl::StrJoin(parts, ",");
}

}  // namespace vramlab::server
