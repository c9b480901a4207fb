// Reads one JSON object the way protobuf's JSON parser reads a message: each field may be named
// in lowerCamelCase or in its original snake_case, `null` means the default, int64 values may be
// strings, enums may be names or numbers, and a key that names no field is an error.
#ifndef VRAMLAB_WORKER_SPEC_JSON_OBJECT_READER_H_
#define VRAMLAB_WORKER_SPEC_JSON_OBJECT_READER_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vramlab::worker {

// snake_case -> lowerCamelCase, as protoc derives json_name.
std::string SnakeToLowerCamel(const std::string& snake);

// Enum name table: proto enumerator name -> number.
using EnumNames = std::vector<std::pair<std::string, int>>;

class JsonObjectReader {
 public:
  // `path` is the snake_case field path of this object ("" for the root, "training.optimizer").
  // `fields` lists every field of the message in snake_case. Throws SpecError if `object` is not
  // an object, has a key naming no field, or names one field twice (camel and snake).
  JsonObjectReader(const nlohmann::json& object, std::string path, std::initializer_list<const char*> fields);

  bool Has(const std::string& field) const;
  int32_t Int32(const std::string& field) const;
  uint32_t UInt32(const std::string& field) const;
  int64_t Int64(const std::string& field) const;
  double Double(const std::string& field) const;
  bool Bool(const std::string& field) const;
  std::string String(const std::string& field) const;
  int Enum(const std::string& field, const EnumNames& names) const;
  std::vector<int32_t> RepeatedInt32(const std::string& field) const;
  // Each element by name or number; an unknown one names "field[i]".
  std::vector<int> RepeatedEnum(const std::string& field, const EnumNames& names) const;
  // The nested message, or an empty object when absent or null.
  const nlohmann::json& Object(const std::string& field) const;

  // "training.seq_len" for field "seq_len" of "training".
  std::string PathOf(const std::string& field) const;

 private:
  // nullptr when the field is absent or JSON null.
  const nlohmann::json* Find(const std::string& field) const;
  int64_t Integer(const std::string& field, int64_t min, int64_t max) const;

  std::string path_;
  std::map<std::string, const nlohmann::json*> values_;  // by snake_case name
};

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_SPEC_JSON_OBJECT_READER_H_
