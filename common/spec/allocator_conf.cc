#include "common/spec/allocator_conf.h"

#include <sstream>

namespace vramlab::spec_rules {

std::string AllocatorConfString(const plain::AllocatorConfig& settings) {
  std::ostringstream conf;
  auto add = [&conf](const std::string& item) {
    if (conf.tellp() > 0) conf << ',';
    conf << item;
  };
  if (settings.expandable_segments) add("expandable_segments:True");
  if (settings.max_split_size_mb > 0) {
    add("max_split_size_mb:" + std::to_string(settings.max_split_size_mb));
  }
  if (settings.garbage_collection_threshold > 0) {
    std::ostringstream threshold;
    threshold << settings.garbage_collection_threshold;
    add("garbage_collection_threshold:" + threshold.str());
  }
  if (!settings.extra.empty()) add(settings.extra);
  return conf.str();
}

bool IsAllocatorExtraChar(char c) {
  const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  return alnum || c == '_' || c == ':' || c == ',' || c == '.' || c == '-' || c == '[' ||
         c == ']' || c == '>';
}

}  // namespace vramlab::spec_rules
