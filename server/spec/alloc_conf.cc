#include "server/spec/alloc_conf.h"

#include "common/spec/allocator_conf.h"

namespace vramlab::server {

std::string AllocatorConfString(const vramlab::v1::AllocatorConfig& config) {
  spec_rules::AllocatorSettings settings;
  settings.expandable_segments = config.expandable_segments();
  settings.max_split_size_mb = config.max_split_size_mb();
  settings.garbage_collection_threshold = config.garbage_collection_threshold();
  settings.extra = config.extra();
  return spec_rules::AllocatorConfString(settings);
}

}  // namespace vramlab::server
