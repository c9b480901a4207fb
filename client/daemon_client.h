// The daemon's API as the CLI uses it: one method per RPC, gRPC statuses turned into
// absl::Status with a message a person can act on (which address was unreachable, that the token
// was refused). Every request carries "authorization: Bearer <token>" when a token is set.
#ifndef VRAMLAB_CLIENT_DAEMON_CLIENT_H_
#define VRAMLAB_CLIENT_DAEMON_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/connection_options.h"
#include "grpcpp/grpcpp.h"
#include "vramlab/v1/service.grpc.pb.h"

namespace vramlab::client {

class DaemonClient {
 public:
  // Builds the channel (TLS when options.ca_cert_path is set). Does not contact the daemon.
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Create(const ConnectionOptions& options);

  absl::StatusOr<vramlab::v1::Experiment> Submit(
      const vramlab::v1::SubmitExperimentRequest& request);
  absl::StatusOr<vramlab::v1::Experiment> Get(const std::string& id);
  absl::StatusOr<vramlab::v1::ListExperimentsResponse> List(
      const vramlab::v1::ListExperimentsRequest& request);
  absl::StatusOr<vramlab::v1::Experiment> Cancel(const std::string& id);
  absl::StatusOr<vramlab::v1::Experiment> Update(
      const vramlab::v1::UpdateExperimentRequest& request);
  absl::StatusOr<vramlab::v1::Experiment> Hold(const std::string& id);
  absl::StatusOr<vramlab::v1::Experiment> Release(const std::string& id);
  absl::StatusOr<vramlab::v1::DeleteExperimentResponse> Delete(const std::string& id);
  absl::StatusOr<vramlab::v1::MemoryEstimate> Estimate(
      const vramlab::v1::EstimateMemoryRequest& request);
  absl::StatusOr<vramlab::v1::ServerInfo> GetServerInfo();
  // The standard grpc.health.v1 Check of the whole server, which the daemon answers without
  // authentication: OK when it reports SERVING, UNAVAILABLE with the reported status otherwise.
  absl::Status CheckHealth();

  // Calls `on_event` for each event until the stream ends (the experiment ended) or `on_event`
  // returns false. No deadline: a run may take hours.
  absl::Status Watch(const vramlab::v1::WatchExperimentRequest& request,
                     const std::function<bool(const vramlab::v1::ExperimentEvent&)>& on_event);
  // Calls `on_data` with each chunk of the allocator snapshot / the worker log.
  absl::Status DownloadSnapshot(const std::string& id,
                                const std::function<void(absl::string_view)>& on_data);
  // With `follow`, the stream stays open until the experiment has ended (no deadline).
  absl::Status DownloadLog(const std::string& id,
                           const std::function<void(absl::string_view)>& on_data,
                           bool follow = false);

  const std::string& address() const { return options_.address; }

 private:
  DaemonClient(ConnectionOptions options, std::shared_ptr<grpc::Channel> channel);
  // Sets metadata and, for unary calls, the deadline.
  void Prepare(grpc::ClientContext& context, bool with_deadline) const;
  absl::Status Convert(const grpc::Status& status) const;
  // One unary call with metadata, deadline and status conversion.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(grpc::Status (vramlab::v1::VramlabService::Stub::*method)(
                                     grpc::ClientContext*, const Request&, Response*),
                                 const Request& request);
  absl::Status ReadChunks(grpc::ClientReaderInterface<vramlab::v1::DataChunk>& reader,
                          const std::function<void(absl::string_view)>& on_data) const;

  const ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<vramlab::v1::VramlabService::Stub> stub_;
};

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_DAEMON_CLIENT_H_
