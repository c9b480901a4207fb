// vramlab version / completion / presets: commands that answer without the daemon.
#include <string>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/completion.h"
#include "client/exit_codes.h"
#include "client/presets_text.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"

namespace vramlab::client {
namespace {

// `text` as a JSON string literal, quotes and escapes included.
std::string JsonString(const std::string& text) {
  google::protobuf::Value value;
  value.set_string_value(text);
  std::string json = MessageToJson(value, /*pretty=*/false);
  while (!json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

}  // namespace

absl::StatusOr<int> RunVersion(CommandEnv& env) {
  if (!env.args().positionals().empty()) {
    return absl::InvalidArgumentError("vramlab version takes no positional arguments");
  }
  const std::string grpc_version = grpc::Version();
  const std::string protobuf_version =
      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION);
  if (env.json()) {
    // Written field by field: a Struct's map would print its keys in a different order each run.
    env.out() << "{\n \"version\": " << JsonString(VRAMLAB_VERSION)
              << ",\n \"grpcVersion\": " << JsonString(grpc_version)
              << ",\n \"protobufVersion\": " << JsonString(protobuf_version) << "\n}\n";
  } else {
    env.out() << "vramlab " << VRAMLAB_VERSION << " (gRPC " << grpc_version << ", protobuf "
              << protobuf_version << ")\n";
  }
  return kExitOk;
}

absl::StatusOr<int> RunPresets(CommandEnv& env) {
  if (!env.args().positionals().empty()) {
    return absl::InvalidArgumentError("vramlab presets takes no positional arguments");
  }
  env.out() << (env.json() ? PresetsJson() : PresetsText());
  return kExitOk;
}

absl::StatusOr<int> RunCompletion(CommandEnv& env) {
  const auto& positionals = env.args().positionals();
  if (positionals.size() != 1) {
    return absl::InvalidArgumentError("vramlab completion needs one shell: bash or zsh");
  }
  ASSIGN_OR_RETURN(std::string script, CompletionScript(positionals[0]));
  env.out() << script;
  return kExitOk;
}

}  // namespace vramlab::client
