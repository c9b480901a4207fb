#include "common/hf/json_value_text.h"

namespace vramlab::hf {

std::string DescribeJsonValue(const nlohmann::json& value) {
  if (value.is_number() || value.is_boolean() || value.is_null()) return value.dump();
  if (value.is_string()) {
    return "a string of " + std::to_string(value.get_ref<const std::string&>().size()) + " bytes";
  }
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " values";
  if (value.is_object()) return "an object";
  return "a binary value";
}

}  // namespace vramlab::hf
