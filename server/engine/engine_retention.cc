// The Engine's deletion of experiments: `delete` on request and the operator's retention policy
// (docs/DAEMON.md, "Retention").
//
// A deletion is two steps: one store transaction (events, record, and a tombstone that keeps the
// id from being given again), then the removal of the experiment's directory. A daemon killed
// between them finishes the second at its next start (FinishInterruptedDeletions), so a deletion
// is never seen half-done: the experiment is either wholly there or gone.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/auth/authenticator.h"
#include "server/engine/engine.h"
#include "server/engine/experiment_files.h"
#include "server/engine/experiment_id.h"

namespace vramlab::server {

using vramlab::v1::Experiment;

namespace {

int64_t TreeBytes(const std::filesystem::path& root) {
  std::error_code error;
  int64_t bytes = 0;
  for (std::filesystem::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) {
      const auto size = it->file_size(size_error);
      if (!size_error) bytes += static_cast<int64_t>(size);
    }
  }
  return bytes;
}

}  // namespace

absl::StatusOr<vramlab::v1::DeleteExperimentResponse> Engine::Delete(const Principal& caller,
                                                                     const std::string& id) {
  RETURN_IF_ERROR(CheckExperimentId(id));
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("the daemon is shutting down");
    ASSIGN_OR_RETURN(Experiment experiment, GetLocked(id));
    RETURN_IF_ERROR(CheckMayModify(caller, experiment.owner()));
    if (unfinished_.contains(id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("experiment ", id, " is ", Experiment::State_Name(experiment.state()),
                       ": cancel it first (vramlab cancel ", id, "), then delete it"));
    }
    if (unstored_.contains(id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("experiment ", id,
                       " ended but its final state is not stored yet (the data "
                       "directory's disk cannot be written); delete it once it is"));
    }
  }
  ASSIGN_OR_RETURN(int64_t file_bytes, DeleteEnded(id, "request"));
  UpdateStoreSizeMetrics();
  vramlab::v1::DeleteExperimentResponse response;
  response.set_id(id);
  response.set_file_bytes(file_bytes);
  return response;
}

absl::StatusOr<int64_t> Engine::DeleteEnded(const std::string& id, const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    // Checked again under the lock that orders it with every state change.
    if (unfinished_.contains(id) || unstored_.contains(id)) {
      return absl::FailedPreconditionError(absl::StrCat("experiment ", id, " has not ended"));
    }
    RETURN_IF_ERROR(store_->DeleteExperiment(id));
  }
  if (store_->ArmedDeleteFault() == DeleteFault::kBeforeFiles) raise(SIGKILL);
  ExperimentFiles files(options_.data_dir, id);
  const int64_t file_bytes = TreeBytes(files.dir());
  std::error_code error;
  std::filesystem::remove_all(files.dir(), error);
  if (error) {
    // The record is gone; the files are removed at the next start.
    std::fprintf(stderr, "vramlabd: %s deleted; its files in %s are not removed yet (%s)\n",
                 id.c_str(), files.dir().c_str(), error.message().c_str());
  }
  if (absl::Status reclaimed = store_->ReclaimSpace(); !reclaimed.ok()) {
    std::fprintf(stderr, "vramlabd: after deleting %s the store kept its free pages (%s)\n",
                 id.c_str(), std::string(reclaimed.message()).c_str());
  }
  metrics_->OnExperimentDeleted(reason);
  return file_bytes;
}

void Engine::FinishInterruptedDeletions() {
  auto ids = store_->DeletedIds();
  if (!ids.ok()) {
    std::fprintf(stderr, "vramlabd: cannot read the deleted experiments (%s)\n",
                 std::string(ids.status().message()).c_str());
    return;
  }
  for (const std::string& id : *ids) {
    ExperimentFiles files(options_.data_dir, id);
    std::error_code error;
    if (!std::filesystem::exists(files.dir(), error)) continue;
    std::filesystem::remove_all(files.dir(), error);
    std::fprintf(stderr, "vramlabd: finished deleting %s: removed its files%s%s\n", id.c_str(),
                 error ? ": " : "", error ? error.message().c_str() : "");
  }
}

int64_t Engine::ExperimentFilesBytes() const {
  return TreeBytes(std::filesystem::path(options_.data_dir) / "experiments");
}

void Engine::UpdateStoreSizeMetrics() {
  auto database = store_->DatabaseBytes();
  metrics_->SetStoreSize(database.ok() ? *database : 0, ExperimentFilesBytes());
}

absl::StatusOr<int> Engine::ApplyRetention() {
  const RetentionOptions& policy = options_.retention;
  if (policy.retain <= absl::ZeroDuration() && policy.max_store_bytes <= 0) return 0;
  ASSIGN_OR_RETURN(std::vector<FinishedExperiment> finished, store_->ListFinished());
  const absl::Time cutoff = absl::Now() - policy.retain;
  // The files are walked once per pass; each deletion then subtracts its own.
  int64_t files = 0;
  int64_t total = 0;
  if (policy.max_store_bytes > 0) {
    ASSIGN_OR_RETURN(int64_t database, store_->DatabaseBytes());
    files = ExperimentFilesBytes();
    total = database + files;
  }
  int deleted = 0;
  // Oldest end first: each one is deleted for its age, or while the store is over its bound.
  for (const FinishedExperiment& row : finished) {
    std::string reason;
    if (policy.retain > absl::ZeroDuration() && row.end_time < cutoff) {
      reason = "retention_age";
    } else if (policy.max_store_bytes > 0 && total > policy.max_store_bytes) {
      reason = "retention_size";
    } else {
      break;
    }
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) break;
    }
    auto file_bytes = DeleteEnded(row.id, reason);
    // Ended since the listing cannot be: an experiment never leaves a final state. A store that
    // fails stops the pass; the next one tries again.
    if (absl::IsNotFound(file_bytes.status())) continue;
    RETURN_IF_ERROR(file_bytes.status());
    ++deleted;
    std::fprintf(stderr, "vramlabd: retention deleted %s (%s)\n", row.id.c_str(),
                 reason == "retention_age" ? "older than --retain-days" : "--max-store-bytes");
    if (policy.max_store_bytes > 0) {
      ASSIGN_OR_RETURN(int64_t database, store_->DatabaseBytes());
      files = std::max<int64_t>(0, files - *file_bytes);
      total = database + files;
    }
  }
  return deleted;
}

void Engine::RetentionLoop() {
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shut_down_; };
  while (true) {
    UpdateStoreSizeMetrics();
    if (auto deleted = ApplyRetention(); !deleted.ok()) {
      std::fprintf(stderr, "vramlabd: retention pass stopped: %s\n",
                   std::string(deleted.status().message()).c_str());
    } else if (*deleted > 0) {
      UpdateStoreSizeMetrics();
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.retention.interval)) return;
  }
}

}  // namespace vramlab::server
