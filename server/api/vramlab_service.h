// The gRPC front end of the Engine: authenticates each call, translates statuses, streams files.
// Every method may run on any gRPC thread concurrently; the Engine is thread-safe.
#ifndef VRAMLAB_SERVER_API_VRAMLAB_SERVICE_H_
#define VRAMLAB_SERVER_API_VRAMLAB_SERVICE_H_

#include "server/auth/auth_throttle.h"
#include "server/auth/authenticator.h"
#include "server/engine/engine.h"
#include "server/metrics/metrics.h"
#include "vramlab/v1/service.grpc.pb.h"

namespace vramlab::server {

class VramlabServiceImpl final : public vramlab::v1::VramlabService::Service {
 public:
  // Every pointer must outlive the service. Failed authentications are counted in `metrics` and
  // recorded in `throttle`, which refuses callers that fail too often.
  VramlabServiceImpl(Engine* engine, const Authenticator* authenticator, AuthThrottle* throttle,
                     Metrics* metrics)
      : engine_(engine), authenticator_(authenticator), throttle_(throttle), metrics_(metrics) {}

  grpc::Status SubmitExperiment(grpc::ServerContext* context,
                                const vramlab::v1::SubmitExperimentRequest* request,
                                vramlab::v1::Experiment* response) override;
  grpc::Status GetExperiment(grpc::ServerContext* context,
                             const vramlab::v1::GetExperimentRequest* request,
                             vramlab::v1::Experiment* response) override;
  grpc::Status ListExperiments(grpc::ServerContext* context,
                               const vramlab::v1::ListExperimentsRequest* request,
                               vramlab::v1::ListExperimentsResponse* response) override;
  grpc::Status CancelExperiment(grpc::ServerContext* context,
                                const vramlab::v1::CancelExperimentRequest* request,
                                vramlab::v1::Experiment* response) override;
  grpc::Status UpdateExperiment(grpc::ServerContext* context,
                                const vramlab::v1::UpdateExperimentRequest* request,
                                vramlab::v1::Experiment* response) override;
  grpc::Status HoldExperiment(grpc::ServerContext* context,
                              const vramlab::v1::HoldExperimentRequest* request,
                              vramlab::v1::Experiment* response) override;
  grpc::Status ReleaseExperiment(grpc::ServerContext* context,
                                 const vramlab::v1::ReleaseExperimentRequest* request,
                                 vramlab::v1::Experiment* response) override;
  grpc::Status DeleteExperiment(grpc::ServerContext* context,
                                const vramlab::v1::DeleteExperimentRequest* request,
                                vramlab::v1::DeleteExperimentResponse* response) override;
  grpc::Status WatchExperiment(grpc::ServerContext* context,
                               const vramlab::v1::WatchExperimentRequest* request,
                               grpc::ServerWriter<vramlab::v1::ExperimentEvent>* writer) override;
  grpc::Status GetMemorySnapshot(grpc::ServerContext* context,
                                 const vramlab::v1::GetMemorySnapshotRequest* request,
                                 grpc::ServerWriter<vramlab::v1::DataChunk>* writer) override;
  grpc::Status GetExperimentLog(grpc::ServerContext* context,
                                const vramlab::v1::GetExperimentLogRequest* request,
                                grpc::ServerWriter<vramlab::v1::DataChunk>* writer) override;
  grpc::Status EstimateMemory(grpc::ServerContext* context,
                              const vramlab::v1::EstimateMemoryRequest* request,
                              vramlab::v1::MemoryEstimate* response) override;
  grpc::Status GetServerInfo(grpc::ServerContext* context,
                             const vramlab::v1::GetServerInfoRequest* request,
                             vramlab::v1::ServerInfo* response) override;

 private:
  absl::StatusOr<Principal> Caller(grpc::ServerContext* context) const;

  Engine* const engine_;
  const Authenticator* const authenticator_;
  AuthThrottle* const throttle_;
  Metrics* const metrics_;
};

// absl::Status to grpc::Status, the code preserved and the message bounded (BoundedText to
// kMaxStatusMessageBytes): every refusal an RPC answers passes here.
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_API_VRAMLAB_SERVICE_H_
