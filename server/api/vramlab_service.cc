#include "server/api/vramlab_service.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/bounded_text.h"

namespace vramlab::server {
namespace {

constexpr size_t kChunkBytes = 64 * 1024;
constexpr absl::Duration kWatchPoll = absl::Milliseconds(250);

// Streams a file in chunks from byte `*offset`, which it advances; NOT_FOUND if it does not
// exist.
grpc::Status StreamFile(grpc::ServerContext* context, const std::string& path,
                        grpc::ServerWriter<vramlab::v1::DataChunk>* writer, int64_t* offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return grpc::Status(grpc::StatusCode::NOT_FOUND, "file not available yet");
  in.seekg(*offset);
  if (!in) return grpc::Status::OK;  // shorter than the offset: nothing to send yet
  std::string buffer(kChunkBytes, '\0');
  vramlab::v1::DataChunk chunk;
  while (in && !context->IsCancelled()) {
    in.read(buffer.data(), buffer.size());
    std::streamsize n = in.gcount();
    if (n <= 0) break;
    chunk.set_data(buffer.data(), n);
    *offset += n;
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
  }
  return grpc::Status::OK;
}

grpc::Status StreamFile(grpc::ServerContext* context, const std::string& path,
                        grpc::ServerWriter<vramlab::v1::DataChunk>* writer) {
  int64_t offset = 0;
  return StreamFile(context, path, writer, &offset);
}

bool IsFinal(vramlab::v1::Experiment::State state) {
  return state != vramlab::v1::Experiment::QUEUED && state != vramlab::v1::Experiment::RUNNING &&
         state != vramlab::v1::Experiment::STATE_UNSPECIFIED;
}

}  // namespace

// The Engine's answer as the RPC's response or status.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpc(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message = BoundedText(status.message(), kMaxStatusMessageBytes);
  if (message.empty()) message = absl::StatusCodeToString(status.code());
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

absl::StatusOr<Principal> VramlabServiceImpl::Caller(grpc::ServerContext* context) const {
  if (!authenticator_->enabled()) return authenticator_->Authenticate(context->client_metadata());
  const std::string peer = AuthThrottle::PeerAddress(context->peer());
  if (absl::Status allowed = throttle_->Check(peer, absl::Now()); !allowed.ok()) {
    metrics_->OnAuthThrottled();
    return allowed;
  }
  auto caller = authenticator_->Authenticate(context->client_metadata());
  if (!caller.ok()) {
    throttle_->RecordFailure(peer, absl::Now());
    metrics_->OnAuthFailure();
  }
  return caller;
}

#define VRAMLAB_AUTHENTICATE(context, caller) \
  auto caller = Caller(context);              \
  if (!caller.ok()) return ToGrpc(caller.status())

grpc::Status VramlabServiceImpl::SubmitExperiment(
    grpc::ServerContext* context, const vramlab::v1::SubmitExperimentRequest* request,
    vramlab::v1::Experiment* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Submit(*caller, *request), response);
}

grpc::Status VramlabServiceImpl::GetExperiment(grpc::ServerContext* context,
                                               const vramlab::v1::GetExperimentRequest* request,
                                               vramlab::v1::Experiment* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Get(request->id()), response);
}

grpc::Status VramlabServiceImpl::ListExperiments(grpc::ServerContext* context,
                                                 const vramlab::v1::ListExperimentsRequest* request,
                                                 vramlab::v1::ListExperimentsResponse* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->List(*caller, *request), response);
}

grpc::Status VramlabServiceImpl::CancelExperiment(
    grpc::ServerContext* context, const vramlab::v1::CancelExperimentRequest* request,
    vramlab::v1::Experiment* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Cancel(*caller, request->id()), response);
}

grpc::Status VramlabServiceImpl::UpdateExperiment(
    grpc::ServerContext* context, const vramlab::v1::UpdateExperimentRequest* request,
    vramlab::v1::Experiment* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Update(*caller, *request), response);
}

grpc::Status VramlabServiceImpl::HoldExperiment(grpc::ServerContext* context,
                                                const vramlab::v1::HoldExperimentRequest* request,
                                                vramlab::v1::Experiment* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Hold(*caller, request->id()), response);
}

grpc::Status VramlabServiceImpl::ReleaseExperiment(
    grpc::ServerContext* context, const vramlab::v1::ReleaseExperimentRequest* request,
    vramlab::v1::Experiment* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Release(*caller, request->id()), response);
}

grpc::Status VramlabServiceImpl::DeleteExperiment(
    grpc::ServerContext* context, const vramlab::v1::DeleteExperimentRequest* request,
    vramlab::v1::DeleteExperimentResponse* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Delete(*caller, request->id()), response);
}

grpc::Status VramlabServiceImpl::WatchExperiment(
    grpc::ServerContext* context, const vramlab::v1::WatchExperimentRequest* request,
    grpc::ServerWriter<vramlab::v1::ExperimentEvent>* writer) {
  VRAMLAB_AUTHENTICATE(context, caller);
  auto cursor = engine_->Watch(*request);
  if (!cursor.ok()) return ToGrpc(cursor.status());
  std::vector<vramlab::v1::ExperimentEvent> events;
  // The stream ends when the experiment has ended and every event was sent; a client that goes
  // away only ends this loop (the experiment runs on).
  while (!context->IsCancelled()) {
    events.clear();
    auto more = (*cursor)->Next(&events, kWatchPoll);
    if (!more.ok()) return ToGrpc(more.status());
    for (const auto& event : events) {
      if (!writer->Write(event)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
    }
    if (!*more) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
}

grpc::Status VramlabServiceImpl::GetMemorySnapshot(
    grpc::ServerContext* context, const vramlab::v1::GetMemorySnapshotRequest* request,
    grpc::ServerWriter<vramlab::v1::DataChunk>* writer) {
  VRAMLAB_AUTHENTICATE(context, caller);
  auto path = engine_->SnapshotPath(request->id());
  if (!path.ok()) return ToGrpc(path.status());
  return StreamFile(context, *path, writer);
}

grpc::Status VramlabServiceImpl::GetExperimentLog(
    grpc::ServerContext* context, const vramlab::v1::GetExperimentLogRequest* request,
    grpc::ServerWriter<vramlab::v1::DataChunk>* writer) {
  VRAMLAB_AUTHENTICATE(context, caller);
  const int64_t max_offset = engine_->options().worker_limits.max_log_bytes;
  if (request->offset() < 0 || request->offset() > max_offset) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("offset: must be 0 .. ", max_offset,
                                     " (the log's size cap), got ", request->offset()));
  }
  auto path = engine_->LogPath(request->id());
  if (!path.ok()) return ToGrpc(path.status());
  int64_t offset = request->offset();
  // Following: what the file holds, then what the worker appends, until the experiment has
  // ended and its log was read after that.
  while (true) {
    bool ended = true;
    if (request->follow()) {
      auto experiment = engine_->Get(request->id());
      if (!experiment.ok()) return ToGrpc(experiment.status());
      ended = IsFinal(experiment->state());
    }
    grpc::Status status = StreamFile(context, *path, writer, &offset);
    // A queued experiment has no log yet: an empty stream (or a wait), not an error.
    if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) return status;
    if (ended) return grpc::Status::OK;
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
    absl::SleepFor(kWatchPoll);
  }
}

grpc::Status VramlabServiceImpl::EstimateMemory(grpc::ServerContext* context,
                                                const vramlab::v1::EstimateMemoryRequest* request,
                                                vramlab::v1::MemoryEstimate* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  return Reply(engine_->Estimate(*request), response);
}

grpc::Status VramlabServiceImpl::GetServerInfo(grpc::ServerContext* context,
                                               const vramlab::v1::GetServerInfoRequest* request,
                                               vramlab::v1::ServerInfo* response) {
  VRAMLAB_AUTHENTICATE(context, caller);
  *response = engine_->Info();
  return grpc::Status::OK;
}

}  // namespace vramlab::server
