// The generated plain structs against protobuf's own descriptors: every field of ExperimentSpec and
// WorkerEvent, filled with a value other than its default, survives
//   proto -> FromProto -> ToProto                       (the daemon's converters),
//   proto -> protobuf JSON -> ReadJson -> ToProto       (the worker reading the daemon's spec),
//   proto -> FromProto -> ToJson -> protobuf JSON parse (the daemon reading the worker's events).
// A field the generator's parser missed, mistyped or misnamed loses its value on one of these
// paths; an `optional` one set to zero, or left unset, must keep that presence on each.
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "schema/json_object_reader.h"
#include "schema/vramlab_v1.plain_json.h"
#include "schema/vramlab_v1.plain_proto.h"

namespace vramlab::plain {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// What Fill does with the `optional` scalars (explicit presence outside a oneof).
enum class Optionals {
  kNonZero,  // set, to a value other than the default, as every other field
  kZero,     // set, to the default value: present although zero
  kUnset,    // left absent
};

// An `optional` scalar (proto3 `optional`: presence of its own, outside any real oneof).
bool IsOptionalScalar(const FieldDescriptor* f) {
  return f->has_presence() && !f->is_repeated() &&
         f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE && f->real_containing_oneof() == nullptr;
}

// Sets `f` to its default value, which for an `optional` field makes it present.
void SetZero(Message* message, const FieldDescriptor* f) {
  const Reflection* r = message->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      r->SetInt32(message, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      r->SetInt64(message, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      r->SetUInt32(message, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->SetUInt64(message, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      r->SetDouble(message, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      r->SetFloat(message, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      r->SetBool(message, f, false);
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      r->SetString(message, f, "");
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      r->SetEnumValue(message, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
}

// Sets every field of `message` to a value other than its default (`salt` varies them), the
// `optional` scalars as `optionals` says. In each oneof, the member at position `oneof_choice`
// (modulo its size) is the one set.
void Fill(Message* message, int salt, int oneof_choice, Optionals optionals = Optionals::kNonZero,
          int depth = 0) {
  const google::protobuf::Descriptor* d = message->GetDescriptor();
  const Reflection* r = message->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (const google::protobuf::OneofDescriptor* o = f->real_containing_oneof()) {
      if (o->field(oneof_choice % o->field_count()) != f) continue;
    }
    if (IsOptionalScalar(f) && optionals != Optionals::kNonZero) {
      if (optionals == Optionals::kZero) SetZero(message, f);
      continue;
    }
    const int v = salt + i + 1;
    for (int n = 0; n < (f->is_repeated() ? 2 : 1); ++n) {
      const int value = v + n;
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          f->is_repeated() ? r->AddInt32(message, f, value) : r->SetInt32(message, f, value);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          f->is_repeated() ? r->AddInt64(message, f, (int64_t{1} << 40) + value)
                           : r->SetInt64(message, f, (int64_t{1} << 40) + value);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          f->is_repeated() ? r->AddUInt32(message, f, value) : r->SetUInt32(message, f, value);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          f->is_repeated() ? r->AddUInt64(message, f, value) : r->SetUInt64(message, f, value);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          f->is_repeated() ? r->AddDouble(message, f, value + 0.25)
                           : r->SetDouble(message, f, value + 0.25);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          f->is_repeated() ? r->AddFloat(message, f, value + 0.5f)
                           : r->SetFloat(message, f, value + 0.5f);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          f->is_repeated() ? r->AddBool(message, f, true) : r->SetBool(message, f, true);
          break;
        case FieldDescriptor::CPPTYPE_STRING: {
          const std::string text = f->name() + "-" + std::to_string(value);
          f->is_repeated() ? r->AddString(message, f, text) : r->SetString(message, f, text);
          break;
        }
        case FieldDescriptor::CPPTYPE_ENUM: {
          const google::protobuf::EnumDescriptor* e = f->enum_type();
          const int number = e->value(e->value_count() - 1 - (n % e->value_count()))->number();
          f->is_repeated() ? r->AddEnumValue(message, f, number)
                           : r->SetEnumValue(message, f, number);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth < 6) {
            Fill(f->is_repeated() ? r->AddMessage(message, f) : r->MutableMessage(message, f),
                 salt + 100 * (i + 1), oneof_choice, optionals, depth + 1);
          }
          break;
      }
    }
  }
}

template <typename Proto>
std::string Json(const Proto& proto) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = (proto.ByteSizeLong() % 2) == 0;  // both spellings are read
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(proto, &json, options).ok());
  return json;
}

template <typename Proto>
void ExpectEveryPathKeepsEveryField(int oneof_choice, Optionals optionals = Optionals::kNonZero) {
  Proto original;
  Fill(&original, 7 * oneof_choice, oneof_choice, optionals);
  SCOPED_TRACE(original.ShortDebugString());

  Proto converted;
  ToProto(FromProto(original), &converted);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(original, converted))
      << "FromProto/ToProto: " << converted.ShortDebugString();

  decltype(FromProto(original)) read;
  ReadJson(nlohmann::json::parse(Json(original)), "", &read);
  Proto from_json;
  ToProto(read, &from_json);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(original, from_json))
      << "ReadJson: " << from_json.ShortDebugString();

  Proto parsed;
  const std::string written = ToJson(FromProto(original)).dump();
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(written, &parsed).ok()) << written;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(original, parsed))
      << "ToJson: " << parsed.ShortDebugString();
}

TEST(SchemaRoundTripTest, ExperimentSpecKeepsEveryField) {
  ExpectEveryPathKeepsEveryField<vramlab::v1::ExperimentSpec>(0);
}

TEST(SchemaRoundTripTest, WorkerEventKeepsEveryFieldOfEveryPayload) {
  const int payloads = vramlab::v1::WorkerEvent::descriptor()->oneof_decl(0)->field_count();
  for (int choice = 0; choice < payloads; ++choice)
    ExpectEveryPathKeepsEveryField<vramlab::v1::WorkerEvent>(choice);
}

// An `optional` field's presence is what it says (memory.proto: a sample's allocator snapshot,
// WorkerEvent.rank): a present zero and an absent field each survive every path as they were.
TEST(SchemaRoundTripTest, OptionalFieldsKeepTheirPresence) {
  const int payloads = vramlab::v1::WorkerEvent::descriptor()->oneof_decl(0)->field_count();
  for (Optionals optionals : {Optionals::kZero, Optionals::kUnset}) {
    SCOPED_TRACE(optionals == Optionals::kZero ? "present zeros" : "absent");
    ExpectEveryPathKeepsEveryField<vramlab::v1::ExperimentSpec>(0, optionals);
    for (int choice = 0; choice < payloads; ++choice)
      ExpectEveryPathKeepsEveryField<vramlab::v1::WorkerEvent>(choice, optionals);
  }
}

TEST(SchemaRoundTripTest, ReadJsonNamesTheFieldOfABadValue) {
  ExperimentSpec spec;
  try {
    ReadJson(nlohmann::json::parse(R"({"training": {"optimizer": {"kind": "ADAM"}}})"), "", &spec);
    FAIL() << "an unknown enum name was read";
  } catch (const schema::JsonFieldError& e) {
    EXPECT_EQ(e.field(), "training.optimizer.kind");
  }
  try {
    ReadJson(nlohmann::json::parse(R"({"sweep": {"values": [8, "x"]}})"), "", &spec);
    FAIL() << "a string in an int32 array was read";
  } catch (const schema::JsonFieldError& e) {
    EXPECT_EQ(e.field(), "sweep.values[1]");
  }
  try {
    ReadJson(nlohmann::json::parse(R"({"model": {"presett": "tiny"}})"), "", &spec);
    FAIL() << "an unknown key was read";
  } catch (const schema::JsonFieldError& e) {
    EXPECT_EQ(e.field(), "model.presett");
  }
}

}  // namespace
}  // namespace vramlab::plain
