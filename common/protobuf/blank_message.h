// Whether a protobuf message says anything, shared by the CLI (which drops a spec's blank parts
// before sending it) and the daemon (which refuses fields a command spec cannot use).
// Header-only: common/ compiles into the worker too, which links no Protobuf; only the programs
// that include this link it.
#ifndef VRAMLAB_COMMON_PROTOBUF_BLANK_MESSAGE_H_
#define VRAMLAB_COMMON_PROTOBUF_BLANK_MESSAGE_H_

#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace vramlab {

// True when no field of `message` is set other than sub-messages that are themselves blank (a
// spec's "training": {"optimizer": {}} says nothing). A repeated field with elements is never
// blank.
inline bool IsBlank(const google::protobuf::Message& message) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->is_repeated() ||
        field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE ||
        !IsBlank(message.GetReflection()->GetMessage(message, field))) {
      return false;
    }
  }
  return true;
}

}  // namespace vramlab

#endif  // VRAMLAB_COMMON_PROTOBUF_BLANK_MESSAGE_H_
