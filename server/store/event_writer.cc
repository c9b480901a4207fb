#include "server/store/event_writer.h"

#include <cstdio>

#include "absl/container/flat_hash_map.h"

namespace vramlab::server {
namespace {

// A batch this large is written without waiting for the interval.
constexpr size_t kEagerBatch = 512;

}  // namespace

EventWriter::EventWriter(Store* store, absl::Duration flush_interval,
                         PersistedCallback on_persisted)
    : store_(store), flush_interval_(flush_interval), on_persisted_(std::move(on_persisted)) {
  thread_ = std::thread([this] { Loop(); });
}

EventWriter::~EventWriter() { Stop(); }

void EventWriter::Enqueue(const std::string& experiment_id,
                          const vramlab::v1::ExperimentEvent& event) {
  absl::MutexLock lock(&mu_);
  pending_.emplace_back(experiment_id, event);
  ++enqueued_;
}

void EventWriter::Flush() {
  absl::MutexLock lock(&mu_);
  uint64_t target = enqueued_;
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return committed_ >= target || stop_;
  };
  mu_.Await(absl::Condition(&done));
}

void EventWriter::Stop() {
  if (!thread_.joinable()) return;
  Flush();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void EventWriter::Loop() {
  while (true) {
    std::vector<std::pair<std::string, vramlab::v1::ExperimentEvent>> batch;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || pending_.size() >= kEagerBatch;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), flush_interval_);
      if (stop_ && pending_.empty()) return;
      batch.swap(pending_);
    }
    if (batch.empty()) continue;
    absl::Status status = store_->AppendEvents(batch);
    if (!status.ok()) {
      // Events are lost, experiments are not: the experiment rows are written synchronously.
      std::fprintf(stderr, "vramlabd: writing %zu events failed: %s\n", batch.size(),
                   std::string(status.message()).c_str());
    }
    absl::flat_hash_map<std::string, int64_t> highest;
    for (const auto& [id, event] : batch) {
      int64_t& h = highest[id];
      h = std::max(h, event.sequence());
    }
    for (const auto& [id, sequence] : highest) on_persisted_(id, sequence);
    absl::MutexLock lock(&mu_);
    committed_ += batch.size();
  }
}

}  // namespace vramlab::server
