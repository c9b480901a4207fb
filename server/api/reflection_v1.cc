#include "server/api/reflection_v1.h"

#include <set>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace vramlab::server {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

// Appends `file` and, before it is needed, each dependency not in `sent` (a file already sent on
// the stream is not sent again, as v1alpha does).
void AddFileAndDependencies(const FileDescriptor* file, std::set<std::string>* sent,
                            grpc::reflection::v1::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i)
    AddFileAndDependencies(file->dependency(i), sent, out);
}

void Error(grpc::StatusCode code, const std::string& message, ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(code);
  response->mutable_error_response()->set_error_message(message);
}

}  // namespace

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<ServerReflectionResponse, ServerReflectionRequest>* stream) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  std::set<std::string> sent;
  ServerReflectionRequest request;
  while (stream->Read(&request)) {
    ServerReflectionResponse response;
    response.set_valid_host(request.host());
    *response.mutable_original_request() = request;
    switch (request.message_request_case()) {
      case ServerReflectionRequest::kFileByFilename: {
        const FileDescriptor* file = pool->FindFileByName(request.file_by_filename());
        if (file == nullptr) {
          Error(grpc::StatusCode::NOT_FOUND, "File not found.", &response);
        } else {
          AddFileAndDependencies(file, &sent, response.mutable_file_descriptor_response());
        }
        break;
      }
      case ServerReflectionRequest::kFileContainingSymbol: {
        const FileDescriptor* file =
            pool->FindFileContainingSymbol(request.file_containing_symbol());
        if (file == nullptr) {
          Error(grpc::StatusCode::NOT_FOUND, "Symbol not found.", &response);
        } else {
          AddFileAndDependencies(file, &sent, response.mutable_file_descriptor_response());
        }
        break;
      }
      case ServerReflectionRequest::kFileContainingExtension: {
        const auto& wanted = request.file_containing_extension();
        const auto* type = pool->FindMessageTypeByName(wanted.containing_type());
        const auto* extension = type == nullptr
                                    ? nullptr
                                    : pool->FindExtensionByNumber(type, wanted.extension_number());
        if (extension == nullptr) {
          Error(grpc::StatusCode::NOT_FOUND, "Extension not found.", &response);
        } else {
          AddFileAndDependencies(extension->file(), &sent,
                                 response.mutable_file_descriptor_response());
        }
        break;
      }
      case ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
        if (type == nullptr) {
          Error(grpc::StatusCode::NOT_FOUND, "Type not found.", &response);
        } else {
          std::vector<const google::protobuf::FieldDescriptor*> extensions;
          pool->FindAllExtensions(type, &extensions);
          auto* numbers = response.mutable_all_extension_numbers_response();
          numbers->set_base_type_name(type->full_name());
          for (const auto* e : extensions) numbers->add_extension_number(e->number());
        }
        break;
      }
      case ServerReflectionRequest::kListServices:
        for (const std::string& name : services_) {
          response.mutable_list_services_response()->add_service()->set_name(name);
        }
        break;
      default:
        Error(grpc::StatusCode::UNIMPLEMENTED, "The server does not support this method.",
              &response);
    }
    if (!stream->Write(response)) break;
    if (context->IsCancelled()) break;
  }
  return grpc::Status::OK;
}

}  // namespace vramlab::server
