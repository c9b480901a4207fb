// grpc.reflection.v1.ServerReflection over the generated descriptor pool, beside the v1alpha
// service the gRPC library installs (which it serves from the same pool): tools that speak only
// v1 (newer grpcurl, Postman, grpcui) and those that speak only v1alpha both work.
#ifndef VRAMLAB_SERVER_API_REFLECTION_V1_H_
#define VRAMLAB_SERVER_API_REFLECTION_V1_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace vramlab::server {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `services`: the full names list_services answers with (the server's registered services).
  explicit ReflectionV1Service(std::vector<std::string> services)
      : services_(std::move(services)) {}

  // Answers each request of the stream in order, as v1alpha does: a file with the transitive
  // dependencies not yet sent on this stream, the extension numbers of a type, the service list,
  // or an error_response (NOT_FOUND, INVALID_ARGUMENT) that leaves the stream open.
  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  const std::vector<std::string> services_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_API_REFLECTION_V1_H_
