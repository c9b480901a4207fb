// Reads one JSON object the way protobuf's JSON parser reads a message: each field may be named
// in lowerCamelCase or in its original snake_case, `null` means the default, int64 values may be
// strings, enums may be names or numbers, and a key that names no field is an error. The codec
// that schema/plain_proto.py generates reads every message through this class.
#ifndef VRAMLAB_SCHEMA_JSON_OBJECT_READER_H_
#define VRAMLAB_SCHEMA_JSON_OBJECT_READER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vramlab::schema {

// A JSON document that does not fit the schema. `field` is the snake_case path of the offending
// field ("training.seq_len", "sweep.values[2]"); empty when the document as a whole is at fault.
// what() is "field: reason" (or the reason alone).
class JsonFieldError : public std::runtime_error {
 public:
  JsonFieldError(std::string field, const std::string& reason)
      : std::runtime_error(field.empty() ? reason : field + ": " + reason),
        field_(std::move(field)),
        reason_(reason) {}
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_;
  std::string reason_;
};

// snake_case -> lowerCamelCase, as protoc derives json_name.
std::string SnakeToLowerCamel(const std::string& snake);

// Enum name table: proto enumerator name -> number.
using EnumNames = std::vector<std::pair<std::string, int>>;

class JsonObjectReader {
 public:
  // `path` is the snake_case field path of this object ("" for the root, "training.optimizer").
  // `fields` lists every field of the message in snake_case. Throws JsonFieldError if `object` is
  // not an object, has a key naming no field, or names one field twice (camel and snake).
  JsonObjectReader(const nlohmann::json& object, std::string path,
                   std::initializer_list<const char*> fields);

  // Present and not null.
  bool Has(const std::string& field) const;
  int32_t Int32(const std::string& field) const;
  uint32_t UInt32(const std::string& field) const;
  int64_t Int64(const std::string& field) const;
  uint64_t UInt64(const std::string& field) const;
  double Double(const std::string& field) const;
  bool Bool(const std::string& field) const;
  std::string String(const std::string& field) const;
  int Enum(const std::string& field, const EnumNames& names) const;
  std::vector<int32_t> RepeatedInt32(const std::string& field) const;
  std::vector<std::string> RepeatedString(const std::string& field) const;
  // Each element by name or number; an unknown one names "field[i]".
  std::vector<int> RepeatedEnum(const std::string& field, const EnumNames& names) const;
  // A JSON object of string values (proto map<string, string>).
  std::map<std::string, std::string> StringMap(const std::string& field) const;
  // The nested message, or an empty object when absent or null.
  const nlohmann::json& Object(const std::string& field) const;
  // A repeated message field: its length (0 when absent) and its i-th element.
  size_t ArraySize(const std::string& field) const;
  const nlohmann::json& Element(const std::string& field, size_t i) const;

  // "training.seq_len" for field "seq_len" of "training".
  std::string PathOf(const std::string& field) const;

 private:
  // nullptr when the field is absent or JSON null.
  const nlohmann::json* Find(const std::string& field) const;
  // The array, or nullptr when absent; throws when present and not an array.
  const nlohmann::json* Array(const std::string& field) const;
  int64_t Integer(const std::string& field, int64_t min, int64_t max) const;

  std::string path_;
  std::map<std::string, const nlohmann::json*> values_;  // by snake_case name
};

}  // namespace vramlab::schema

#endif  // VRAMLAB_SCHEMA_JSON_OBJECT_READER_H_
