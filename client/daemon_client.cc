#include "client/daemon_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/file_io.h"
#include "common/status_macros.h"
#include "grpcpp/generic/generic_stub.h"

namespace vramlab::client {

using namespace vramlab::v1;  // NOLINT: the service's many message types

absl::StatusOr<std::unique_ptr<DaemonClient>> DaemonClient::Create(
    const ConnectionOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.ca_cert_path.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    auto pem = ReadFileOrStdin(options.ca_cert_path);
    if (!pem.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--ca-cert: ", pem.status().message()));
    }
    ssl.pem_root_certs = *std::move(pem);
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments arguments;
  // Experiments with long sweeps and their reports can exceed gRPC's 4 MiB default.
  arguments.SetMaxReceiveMessageSize(64 << 20);
  arguments.SetString(GRPC_ARG_PRIMARY_USER_AGENT_STRING, "vramlab-cli/" VRAMLAB_VERSION);
  auto channel = grpc::CreateCustomChannel(options.address, credentials, arguments);
  return std::unique_ptr<DaemonClient>(new DaemonClient(options, std::move(channel)));
}

DaemonClient::DaemonClient(ConnectionOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)), channel_(channel), stub_(VramlabService::NewStub(channel)) {}

void DaemonClient::Prepare(grpc::ClientContext& context, bool with_deadline) const {
  if (!options_.token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
  if (with_deadline) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
}

absl::Status DaemonClient::Convert(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  std::string message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      message = absl::StrCat("cannot reach vramlabd at ", options_.address, ": ", message,
                             " (is vramlabd running there? point the client at a daemon with "
                             "--addr HOST:PORT or VRAMLAB_ADDR, or 'addr' in the config file)");
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      message = absl::StrCat("no answer from vramlabd at ", options_.address, " within ",
                             absl::FormatDuration(options_.timeout), " (see --timeout)");
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      absl::StrAppend(&message, options_.token.empty()
                                    ? " (no token given: set --token or VRAMLAB_TOKEN)"
                                    : " (check --token or VRAMLAB_TOKEN)");
      break;
    default:
      break;
  }
  return absl::Status(code, message);
}

template <typename Request, typename Response>
absl::StatusOr<Response> DaemonClient::Unary(
    grpc::Status (VramlabService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request) {
  grpc::ClientContext context;
  Prepare(context, true);
  Response response;
  RETURN_IF_ERROR(Convert(((*stub_).*method)(&context, request, &response)));
  return response;
}

absl::StatusOr<Experiment> DaemonClient::Submit(const SubmitExperimentRequest& request) {
  return Unary(&VramlabService::Stub::SubmitExperiment, request);
}

absl::StatusOr<Experiment> DaemonClient::Get(const std::string& id) {
  GetExperimentRequest request;
  request.set_id(id);
  return Unary(&VramlabService::Stub::GetExperiment, request);
}

absl::StatusOr<ListExperimentsResponse> DaemonClient::List(const ListExperimentsRequest& request) {
  return Unary(&VramlabService::Stub::ListExperiments, request);
}

absl::StatusOr<Experiment> DaemonClient::Cancel(const std::string& id) {
  CancelExperimentRequest request;
  request.set_id(id);
  return Unary(&VramlabService::Stub::CancelExperiment, request);
}

absl::StatusOr<Experiment> DaemonClient::Update(const UpdateExperimentRequest& request) {
  return Unary(&VramlabService::Stub::UpdateExperiment, request);
}

absl::StatusOr<Experiment> DaemonClient::Hold(const std::string& id) {
  HoldExperimentRequest request;
  request.set_id(id);
  return Unary(&VramlabService::Stub::HoldExperiment, request);
}

absl::StatusOr<Experiment> DaemonClient::Release(const std::string& id) {
  ReleaseExperimentRequest request;
  request.set_id(id);
  return Unary(&VramlabService::Stub::ReleaseExperiment, request);
}

absl::StatusOr<DeleteExperimentResponse> DaemonClient::Delete(const std::string& id) {
  DeleteExperimentRequest request;
  request.set_id(id);
  return Unary(&VramlabService::Stub::DeleteExperiment, request);
}

absl::StatusOr<MemoryEstimate> DaemonClient::Estimate(const EstimateMemoryRequest& request) {
  return Unary(&VramlabService::Stub::EstimateMemory, request);
}

absl::StatusOr<ServerInfo> DaemonClient::GetServerInfo() {
  return Unary(&VramlabService::Stub::GetServerInfo, GetServerInfoRequest());
}

absl::Status DaemonClient::CheckHealth() {
  // The health proto is not compiled into the client: the request for the whole server is the
  // empty message, and the answer is field 1 (varint) holding SERVING = 1, i.e. bytes 08 01.
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  Prepare(context, true);
  grpc::CompletionQueue queue;
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1);
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &queue);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  RETURN_IF_ERROR(Convert(status));
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const auto& slice : slices)
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  if (bytes == std::string("\x08\x01", 2)) return absl::OkStatus();
  const int reported = bytes.size() == 2 && bytes[0] == '\x08' ? bytes[1] : 0;
  return absl::UnavailableError(absl::StrCat("vramlabd at ", options_.address,
                                             " is not serving (health status ", reported, ")"));
}

absl::Status DaemonClient::Watch(const WatchExperimentRequest& request,
                                 const std::function<bool(const ExperimentEvent&)>& on_event) {
  grpc::ClientContext context;
  Prepare(context, false);
  auto reader = stub_->WatchExperiment(&context, request);
  ExperimentEvent event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      // The caller has what it wanted; dropping a watch never cancels the experiment.
      context.TryCancel();
      reader->Finish().ok();
      return absl::OkStatus();
    }
  }
  return Convert(reader->Finish());
}

absl::Status DaemonClient::ReadChunks(grpc::ClientReaderInterface<DataChunk>& reader,
                                      const std::function<void(absl::string_view)>& on_data) const {
  DataChunk chunk;
  while (reader.Read(&chunk)) on_data(chunk.data());
  return Convert(reader.Finish());
}

absl::Status DaemonClient::DownloadSnapshot(const std::string& id,
                                            const std::function<void(absl::string_view)>& on_data) {
  grpc::ClientContext context;
  // Snapshots of big runs are hundreds of MiB: no per-request deadline, only the connection's.
  Prepare(context, false);
  GetMemorySnapshotRequest request;
  request.set_id(id);
  auto reader = stub_->GetMemorySnapshot(&context, request);
  return ReadChunks(*reader, on_data);
}

absl::Status DaemonClient::DownloadLog(const std::string& id,
                                       const std::function<void(absl::string_view)>& on_data,
                                       bool follow) {
  grpc::ClientContext context;
  Prepare(context, false);
  GetExperimentLogRequest request;
  request.set_id(id);
  request.set_follow(follow);
  auto reader = stub_->GetExperimentLog(&context, request);
  return ReadChunks(*reader, on_data);
}

}  // namespace vramlab::client
