// Builds the daemon's gRPC server: the vramlab service, the standard grpc.health.v1 service
// (SERVING for "" and for "vramlab.v1.VramlabService") and server reflection (so grpcurl works),
// over TLS when a certificate and key are given.
#ifndef VRAMLAB_SERVER_API_GRPC_SERVER_H_
#define VRAMLAB_SERVER_API_GRPC_SERVER_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "server/auth/auth_throttle.h"

namespace vramlab::server {

struct GrpcServerOptions {
  std::string listen_address;  // "127.0.0.1:0" picks a free port
  // Both empty: plaintext. Each must be a regular file of at most 1 MiB (server/auth/flag_file.h);
  // the key is refused when group or others have any access to it.
  std::string tls_cert_path;
  std::string tls_key_path;
  // Well above SpecLimits::max_spec_bytes, so that an oversized spec reaches the spec checks and
  // gets an error naming its field instead of a transport RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = 32 * 1024 * 1024;
  // When set (authentication on), the address of every vramlab call that ends OK is recorded as
  // proven in it (server/auth/proven_address_interceptor.h). Must outlive the server.
  AuthThrottle* auth_throttle = nullptr;
};

struct RunningGrpcServer {
  // grpc.reflection.v1 (the library registers v1alpha itself); outlives `server`, declared first.
  std::unique_ptr<grpc::Service> reflection_v1;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

absl::StatusOr<RunningGrpcServer> StartGrpcServer(const GrpcServerOptions& options,
                                                  grpc::Service* service);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_API_GRPC_SERVER_H_
