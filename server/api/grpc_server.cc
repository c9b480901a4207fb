#include "server/api/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/api/malformed_request_interceptor.h"
#include "server/auth/secret_file.h"
#include "vramlab/v1/service.grpc.pb.h"

namespace vramlab::server {

namespace {

constexpr int kHandshakeTimeoutMs = 10'000;

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const GrpcServerOptions& options) {
  if (options.tls_cert_path.empty() && options.tls_key_path.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_path.empty() || options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  auto cert = ReadWholeFile(options.tls_cert_path);
  if (!cert.ok()) return cert.status();
  auto key = ReadSecretFile(options.tls_key_path, "TLS key file");
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
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(NewMalformedRequestInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || running.port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address,
                                               " (in use by another process?)"));
  }
  // "" is the whole server; per-service probes (Kubernetes grpc.service, grpc_health_probe
  // -service) ask for the service's full name.
  running.server->GetHealthCheckService()->SetServingStatus(true);
  running.server->GetHealthCheckService()->SetServingStatus(
      vramlab::v1::VramlabService::service_full_name(), true);
  return running;
}

}  // namespace vramlab::server
