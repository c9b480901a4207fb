#include "server/api/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/api/malformed_request_interceptor.h"
#include "server/api/reflection_v1.h"
#include "server/auth/flag_file.h"
#include "server/auth/proven_address_interceptor.h"
#include "vramlab/v1/service.grpc.pb.h"

namespace vramlab::server {

namespace {

constexpr int kHandshakeTimeoutMs = 10'000;

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const GrpcServerOptions& options) {
  if (options.tls_cert_path.empty() && options.tls_key_path.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_path.empty() || options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  auto cert = ReadFlagFile("--tls-cert", options.tls_cert_path);
  if (!cert.ok()) return cert.status();
  auto key = ReadFlagFile("--tls-key", options.tls_key_path, {.owner_only = true});
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<RunningGrpcServer> StartGrpcServer(const GrpcServerOptions& options,
                                                  grpc::Service* service) {
  auto credentials = Credentials(options);
  if (!credentials.ok()) return credentials.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  InstallProtobufParseLogHandler();
  grpc::ServerBuilder builder;
  RunningGrpcServer running;
  // Without SO_REUSEPORT a port another process listens on is refused instead of shared: two
  // daemons on one port would split the connections between them.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A connection that has not finished its TLS and HTTP/2 handshake by then is closed: idle TCP
  // connections hold a descriptor each, never a thread, and not for long (gRPC's default: 120 s).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kHandshakeTimeoutMs);
  builder.AddListeningPort(options.listen_address, *credentials, &running.port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.RegisterService(service);
  // What the v1alpha service lists, by the same names; v1 lists itself as well.
  running.reflection_v1 = std::make_unique<ReflectionV1Service>(std::vector<std::string>{
      vramlab::v1::VramlabService::service_full_name(), "grpc.health.v1.Health",
      "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"});
  builder.RegisterService(running.reflection_v1.get());
  // One list: SetInterceptorCreators replaces what an earlier call set.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(NewMalformedRequestInterceptorFactory());
  if (options.auth_throttle != nullptr) {
    interceptors.push_back(std::make_unique<ProvenAddressInterceptorFactory>(
        vramlab::v1::VramlabService::service_full_name(), options.auth_throttle));
  }
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || running.port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address, " (in use by another process?)"));
  }
  // "" is the whole server; per-service probes (Kubernetes grpc.service, grpc_health_probe
  // -service) ask for the service's full name.
  running.server->GetHealthCheckService()->SetServingStatus(true);
  running.server->GetHealthCheckService()->SetServingStatus(
      vramlab::v1::VramlabService::service_full_name(), true);
  return running;
}

}  // namespace vramlab::server
