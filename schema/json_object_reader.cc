#include "schema/json_object_reader.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace vramlab::schema {
namespace {

const nlohmann::json& EmptyObject() {
  static const nlohmann::json* const empty = new nlohmann::json(nlohmann::json::object());
  return *empty;
}

std::string Describe(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

}  // namespace

std::string SnakeToLowerCamel(const std::string& snake) {
  std::string camel;
  bool upper_next = false;
  for (char c : snake) {
    if (c == '_') {
      upper_next = true;
      continue;
    }
    camel += upper_next ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper_next = false;
  }
  return camel;
}

JsonObjectReader::JsonObjectReader(const nlohmann::json& object, std::string path,
                                   std::initializer_list<const char*> fields)
    : path_(std::move(path)) {
  if (!object.is_object()) {
    throw JsonFieldError(path_, "expected a JSON object, got " + Describe(object));
  }
  std::map<std::string, std::string> snake_by_key;
  for (const char* field : fields) {
    snake_by_key[field] = field;
    snake_by_key[SnakeToLowerCamel(field)] = field;
  }
  for (auto it = object.begin(); it != object.end(); ++it) {
    auto known = snake_by_key.find(it.key());
    if (known == snake_by_key.end()) {
      throw JsonFieldError(path_.empty() ? it.key() : path_ + "." + it.key(), "unknown field");
    }
    if (!values_.emplace(known->second, &it.value()).second) {
      throw JsonFieldError(PathOf(known->second), "field given twice (camelCase and snake_case)");
    }
  }
}

std::string JsonObjectReader::PathOf(const std::string& field) const {
  return path_.empty() ? field : path_ + "." + field;
}

const nlohmann::json* JsonObjectReader::Find(const std::string& field) const {
  auto it = values_.find(field);
  if (it == values_.end() || it->second->is_null()) return nullptr;
  return it->second;
}

bool JsonObjectReader::Has(const std::string& field) const { return Find(field) != nullptr; }

int64_t JsonObjectReader::Integer(const std::string& field, int64_t min, int64_t max) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return 0;
  int64_t result = 0;
  if (value->is_number_integer()) {
    if (value->is_number_unsigned() &&
        value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw JsonFieldError(PathOf(field), "integer out of range: " + Describe(*value));
    }
    result = value->get<int64_t>();
  } else if (value->is_number_float()) {
    // Protobuf accepts 1e3 or 5.0 for integer fields, but not 5.5.
    double d = value->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      throw JsonFieldError(PathOf(field), "expected an integer, got " + Describe(*value));
    }
    result = static_cast<int64_t>(d);
  } else if (value->is_string()) {
    const std::string& text = value->get_ref<const std::string&>();
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE ||
        std::isspace(static_cast<unsigned char>(text[0]))) {
      throw JsonFieldError(PathOf(field), "expected an integer, got " + Describe(*value));
    }
    result = parsed;
  } else {
    throw JsonFieldError(PathOf(field), "expected an integer, got " + Describe(*value));
  }
  if (result < min || result > max) {
    throw JsonFieldError(PathOf(field), "integer out of range: " + Describe(*value));
  }
  return result;
}

int32_t JsonObjectReader::Int32(const std::string& field) const {
  return static_cast<int32_t>(
      Integer(field, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
}

uint32_t JsonObjectReader::UInt32(const std::string& field) const {
  return static_cast<uint32_t>(Integer(field, 0, std::numeric_limits<uint32_t>::max()));
}

uint64_t JsonObjectReader::UInt64(const std::string& field) const {
  // Values above INT64_MAX are refused: nothing in the schema needs them.
  return static_cast<uint64_t>(Integer(field, 0, std::numeric_limits<int64_t>::max()));
}

int64_t JsonObjectReader::Int64(const std::string& field) const {
  return Integer(field, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
}

double JsonObjectReader::Double(const std::string& field) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return 0;
  if (value->is_number()) return value->get<double>();
  if (value->is_string()) {
    const std::string& text = value->get_ref<const std::string&>();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    char* end = nullptr;
    double parsed = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == '\0' && !std::isspace(static_cast<unsigned char>(text[0])))
      return parsed;
  }
  throw JsonFieldError(PathOf(field), "expected a number, got " + Describe(*value));
}

bool JsonObjectReader::Bool(const std::string& field) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return false;
  if (!value->is_boolean())
    throw JsonFieldError(PathOf(field), "expected true or false, got " + Describe(*value));
  return value->get<bool>();
}

std::string JsonObjectReader::String(const std::string& field) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return "";
  if (!value->is_string())
    throw JsonFieldError(PathOf(field), "expected a string, got " + Describe(*value));
  return value->get<std::string>();
}

int JsonObjectReader::Enum(const std::string& field, const EnumNames& names) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return 0;
  if (value->is_string()) {
    for (const auto& [name, number] : names) {
      if (name == value->get_ref<const std::string&>()) return number;
    }
  } else if (value->is_number_integer()) {
    int64_t number = value->get<int64_t>();
    for (const auto& entry : names) {
      if (entry.second == number) return entry.second;
    }
  }
  std::string allowed;
  for (const auto& entry : names) allowed += (allowed.empty() ? "" : ", ") + entry.first;
  throw JsonFieldError(PathOf(field),
                       "unknown enum value " + Describe(*value) + " (one of " + allowed + ")");
}

const nlohmann::json* JsonObjectReader::Array(const std::string& field) const {
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return nullptr;
  if (!value->is_array())
    throw JsonFieldError(PathOf(field), "expected an array, got " + Describe(*value));
  for (size_t i = 0; i < value->size(); ++i) {
    if ((*value)[i].is_null()) throw JsonFieldError(PathOf(field), "null element in array");
  }
  return value;
}

namespace {

// Reads element `i` of an array through a one-field object, so that the scalar rules apply, and
// names the element ("field[i]") in any error.
template <typename T, typename Read>
std::vector<T> ReadElements(const nlohmann::json* array, const std::string& path, Read read) {
  std::vector<T> result;
  if (array == nullptr) return result;
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string element_path = path + "[" + std::to_string(i) + "]";
    nlohmann::json element = {{"v", (*array)[i]}};
    JsonObjectReader reader(element, element_path, {"v"});
    try {
      result.push_back(read(reader));
    } catch (const JsonFieldError& e) {
      throw JsonFieldError(element_path, e.reason());
    }
  }
  return result;
}

}  // namespace

std::vector<int32_t> JsonObjectReader::RepeatedInt32(const std::string& field) const {
  return ReadElements<int32_t>(Array(field), PathOf(field),
                               [](const JsonObjectReader& r) { return r.Int32("v"); });
}

std::vector<std::string> JsonObjectReader::RepeatedString(const std::string& field) const {
  return ReadElements<std::string>(Array(field), PathOf(field),
                                   [](const JsonObjectReader& r) { return r.String("v"); });
}

std::vector<int> JsonObjectReader::RepeatedEnum(const std::string& field,
                                                const EnumNames& names) const {
  return ReadElements<int>(Array(field), PathOf(field),
                           [&names](const JsonObjectReader& r) { return r.Enum("v", names); });
}

std::map<std::string, std::string> JsonObjectReader::StringMap(const std::string& field) const {
  std::map<std::string, std::string> result;
  const nlohmann::json* value = Find(field);
  if (value == nullptr) return result;
  if (!value->is_object())
    throw JsonFieldError(PathOf(field), "expected an object, got " + Describe(*value));
  for (auto it = value->begin(); it != value->end(); ++it) {
    if (!it.value().is_string()) {
      throw JsonFieldError(PathOf(field) + "[" + it.key() + "]",
                           "expected a string, got " + Describe(it.value()));
    }
    result[it.key()] = it.value().get<std::string>();
  }
  return result;
}

size_t JsonObjectReader::ArraySize(const std::string& field) const {
  const nlohmann::json* array = Array(field);
  return array == nullptr ? 0 : array->size();
}

const nlohmann::json& JsonObjectReader::Element(const std::string& field, size_t i) const {
  return (*Array(field))[i];
}

const nlohmann::json& JsonObjectReader::Object(const std::string& field) const {
  const nlohmann::json* value = Find(field);
  return value == nullptr ? EmptyObject() : *value;
}

}  // namespace vramlab::schema
