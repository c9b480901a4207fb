// The Engine's durability when the store cannot write: state writes that fail, final states held
// in memory and retried, refusal of new work, and what `show` and the metrics say about it.
#include <sys/statvfs.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/engine/engine.h"

namespace vramlab::server {
namespace {

using vramlab::v1::Experiment;

constexpr absl::Duration kFirstRetry = absl::Milliseconds(100);
constexpr absl::Duration kMaxRetry = absl::Seconds(5);
// While the store writes, the storage thread only refreshes the store metrics this often.
constexpr absl::Duration kHealthyPoll = absl::Seconds(1);

std::string FreeSpace(const std::string& path) {
  struct statvfs fs;
  if (statvfs(path.c_str(), &fs) != 0) return "free space unknown";
  return absl::StrCat(static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize, " bytes free");
}

}  // namespace

absl::Status Engine::PersistLocked(const Experiment& experiment, bool requeue_pending) {
  absl::Status status = store_->UpdateExperiment(experiment, requeue_pending);
  if (!status.ok()) NoteStoreFailureLocked(status);
  return status;
}

void Engine::NoteStoreFailureLocked(const absl::Status& status) {
  ++state_write_failures_;
  if (store_error_.empty()) {
    std::fprintf(stderr,
                 "vramlabd: the data directory cannot be written (%s); holding state "
                 "changes, refusing new experiments\n",
                 std::string(status.message()).c_str());
  }
  store_error_ = std::string(status.message());
  UpdateStoreMetricsLocked();
}

absl::Status Engine::ProbeDataDirLocked() {
  RETURN_IF_ERROR(store_->Probe());
  // Worker files (spec, log) go beside the database: the disk must take a file too.
  std::string path = options_.data_dir + "/.write-probe";
  std::ofstream out(path, std::ios::trunc);
  out << "vramlabd checks that the data directory can be written\n";
  if (!out.flush()) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status Engine::StoreUnwritableError(const std::string& what, const std::string& error) const {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": the disk of the data directory ", options_.data_dir,
                   " cannot be written (", error, "; ", FreeSpace(options_.data_dir),
                   "). New experiments are refused until it can; accepted ones are kept"));
}

absl::Status Engine::CheckStoreWritableLocked() const {
  if (!store_error_.empty()) return StoreUnwritableError("not accepted", store_error_);
  if (hub_.StoreFailing()) return StoreUnwritableError("not accepted", "event writes fail");
  return absl::OkStatus();
}

Experiment Engine::WithStorageLocked(Experiment experiment) const {
  EventStorageStats events = hub_.StorageStats(experiment.id());
  bool state_held = unstored_.contains(experiment.id());
  experiment.set_storage_pending(state_held || events.held > 0);
  experiment.set_events_not_stored(std::max(experiment.events_not_stored(), events.dropped));
  if (state_held) {
    std::string note =
        "final state not stored yet: the data directory's disk cannot be "
        "written; retrying";
    experiment.set_state_reason(experiment.state_reason().empty()
                                    ? note
                                    : absl::StrCat(experiment.state_reason(), " (", note, ")"));
  }
  return experiment;
}

bool Engine::RetryStorageLocked() {
  for (auto it = unstored_.begin(); it != unstored_.end();) {
    Unstored& held = it->second;
    held.experiment.set_events_not_stored(hub_.StorageStats(it->first).dropped);
    absl::Status status = store_->UpdateExperiment(held.experiment, held.requeue_pending);
    if (!status.ok()) {
      ++held.attempts;
      store_error_ = std::string(status.message());
      return false;
    }
    std::fprintf(stderr, "vramlabd: %s: final state %s stored after %d attempts\n",
                 it->first.c_str(), Experiment::State_Name(held.experiment.state()).c_str(),
                 held.attempts + 1);
    unstored_.erase(it++);
  }
  if (absl::Status probe = ProbeDataDirLocked(); !probe.ok()) {
    store_error_ = std::string(probe.message());
    return false;
  }
  if (!store_error_.empty()) {
    std::fprintf(stderr, "vramlabd: the store writes again; accepting and launching\n");
  }
  store_error_.clear();
  return true;
}

void Engine::StorageLoop() {
  absl::Duration retry = kFirstRetry;
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shut_down_; };
  while (true) {
    bool failing = !store_error_.empty();
    mu_.AwaitWithTimeout(absl::Condition(&stopping), failing ? retry : kHealthyPoll);
    if (shut_down_) return;  // Shutdown makes the last attempt
    if (!store_error_.empty()) {
      if (RetryStorageLocked()) {
        retry = kFirstRetry;
        ScheduleLocked();
        PublishQueuePositionsLocked();
        UpdateQueueMetricsLocked();
      } else {
        retry = std::min(kMaxRetry, retry * 2);
      }
    }
    UpdateStoreMetricsLocked();
  }
}

void Engine::StoreHeldStatesBeforeExit() {
  absl::Time deadline = absl::Now() + kShutdownStorageTimeout;
  absl::Duration retry = kFirstRetry;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (unstored_.empty() || RetryStorageLocked() || absl::Now() >= deadline) {
        for (const auto& [id, held] : unstored_) {
          std::fprintf(stderr,
                       "vramlabd: %s: final state %s could not be stored before exit (%s); the "
                       "next start treats it as interrupted\n",
                       id.c_str(), Experiment::State_Name(held.experiment.state()).c_str(),
                       store_error_.c_str());
        }
        return;
      }
    }
    absl::SleepFor(std::min(retry, deadline - absl::Now()));
    retry = std::min(kMaxRetry, retry * 2);
  }
}

void Engine::UpdateStoreMetricsLocked() {
  EventStorageStats events = hub_.StorageTotals();
  StoreHealth health;
  health.writable = store_error_.empty() && !hub_.StoreFailing();
  health.pending_experiment_states = static_cast<int64_t>(unstored_.size());
  health.pending_events = events.held;
  health.write_failures = state_write_failures_;
  health.events_not_stored = events.dropped;
  metrics_->SetStoreHealth(health);
}

}  // namespace vramlab::server
