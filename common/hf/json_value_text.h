// How an error describes a JSON value read from a host file: numbers, booleans and null as they
// are, anything else by its kind and size only. Strings are never echoed: an error must not carry
// a file's text (a spec could otherwise make the worker quote a secret back to its user).
#ifndef VRAMLAB_COMMON_HF_JSON_VALUE_TEXT_H_
#define VRAMLAB_COMMON_HF_JSON_VALUE_TEXT_H_

#include <string>

#include <nlohmann/json.hpp>

namespace vramlab::hf {

// "128", "1e-06", "true", "null", "a string of 5 bytes", "an array of 3 values", "an object".
std::string DescribeJsonValue(const nlohmann::json& value);

}  // namespace vramlab::hf

#endif  // VRAMLAB_COMMON_HF_JSON_VALUE_TEXT_H_
