#include "server/api/malformed_request_interceptor.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace vramlab::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// The full name of the last string field this thread failed to parse as UTF-8, until the call's
// interceptor takes it.
thread_local std::string invalid_utf8_field;

constexpr absl::string_view kUtf8Prefix = "String field '";
constexpr absl::string_view kUtf8Parsing = "' contains invalid UTF-8 data when parsing";

void ProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                 const std::string& message) {
  absl::string_view text = message;
  if (absl::StartsWith(text, kUtf8Prefix)) {
    const size_t end = text.find(kUtf8Parsing);
    if (end != absl::string_view::npos) {
      invalid_utf8_field = std::string(text.substr(kUtf8Prefix.size(), end - kUtf8Prefix.size()));
      return;
    }
  }
  static const char* const kLevels[] = {"INFO", "WARNING", "ERROR", "FATAL"};
  const int index = level >= 0 && level <= 3 ? level : 2;
  std::fprintf(stderr, "[libprotobuf %s %s:%d] %s\n", kLevels[index], filename, line,
               message.c_str());
}

// One per call; gRPC calls Intercept for one call at a time.
class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(const char* method) : method_(method ? method : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (methods->GetRecvMessage() == nullptr) {
        malformed_ = true;
        field_ = std::move(invalid_utf8_field);
      }
      invalid_utf8_field.clear();
    }
    if (malformed_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          !field_.empty()
              ? "request: " + field_ + ": not valid UTF-8 (a string field must be UTF-8 text)"
              : "request: the message does not parse as the request of " + method_ +
                    " (a client built from another vramlab.v1 proto, or damaged bytes)"));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool malformed_ = false;
  std::string field_;  // the string field that was not UTF-8, when that was why
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MalformedRequestInterceptor(info->method());
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory() {
  return std::make_unique<Factory>();
}

void InstallProtobufParseLogHandler() { google::protobuf::SetLogHandler(&ProtobufLog); }

}  // namespace vramlab::server
