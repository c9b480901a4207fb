#include "client/command_env.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace vramlab::client {

absl::StatusOr<DaemonClient*> CommandEnv::Client() {
  if (client_ == nullptr) {
    auto created = DaemonClient::Create(connection_);
    if (!created.ok()) return created.status();
    client_ = *std::move(created);
  }
  return client_.get();
}

void CommandEnv::PrintJson(const google::protobuf::Message& message) {
  out_ << MessageToJson(message, true);
  out_.flush();
}

std::string MessageToJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  std::string json;
  // Serializing a valid message cannot fail; an empty object is the safe fallback regardless.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) json = "{}";
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

absl::StatusOr<std::string> SingleId(const ParsedArgs& args, const char* command) {
  if (args.positionals().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("vramlab ", command,
                                                   " needs exactly one experiment ID (got ",
                                                   args.positionals().size(), ")"));
  }
  return args.positionals()[0];
}

}  // namespace vramlab::client
