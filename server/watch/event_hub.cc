#include "server/watch/event_hub.h"

namespace vramlab::server {

EventHub::EventHub(Store* store, EventHubOptions options)
    : store_(store),
      options_(options),
      writer_(store, EventWriterOptions{.flush_interval = options.flush_interval},
              [this](const std::string& id, int64_t sequence) { OnPersisted(id, sequence); }) {}

EventHub::~EventHub() { Stop(); }

std::shared_ptr<EventChannel> EventHub::Open(const std::string& experiment_id,
                                             int64_t last_sequence) {
  absl::MutexLock lock(&mu_);
  auto& channel = channels_[experiment_id];
  if (channel == nullptr) {
    channel = std::make_shared<EventChannel>(experiment_id, last_sequence, options_.ring_capacity);
    if (shutdown_) channel->Shutdown();
  }
  return channel;
}

std::shared_ptr<EventChannel> EventHub::Find(const std::string& experiment_id) const {
  absl::MutexLock lock(&mu_);
  auto it = channels_.find(experiment_id);
  return it == channels_.end() ? nullptr : it->second;
}

int64_t EventHub::Publish(const std::string& experiment_id, vramlab::v1::ExperimentEvent event) {
  std::shared_ptr<EventChannel> channel = Find(experiment_id);
  if (channel == nullptr) return 0;
  return channel->Publish(std::move(event), &writer_);
}

void EventHub::Close(const std::string& experiment_id) {
  std::shared_ptr<EventChannel> channel = Find(experiment_id);
  if (channel == nullptr) return;
  channel->Close();
  if (channel->Drained()) {
    absl::MutexLock lock(&mu_);
    channels_.erase(experiment_id);
  }
}

void EventHub::OnPersisted(const std::string& experiment_id, int64_t sequence) {
  absl::MutexLock lock(&mu_);
  auto it = channels_.find(experiment_id);
  if (it == channels_.end()) return;
  it->second->MarkPersisted(sequence);
  // Watchers still holding the channel keep it alive; new ones read the store.
  if (it->second->Drained()) channels_.erase(it);
}

void EventHub::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  for (auto& [id, channel] : channels_) channel->Shutdown();
}

bool EventHub::Flush(absl::Duration timeout) { return writer_.Flush(timeout); }

void EventHub::Stop() { writer_.Stop(); }

void EventHub::SetWatcherListener(std::function<void(int)> on_change) {
  absl::MutexLock lock(&mu_);
  on_watchers_ = std::move(on_change);
}

void EventHub::AddWatcher(EventChannel* channel, int delta) {
  if (channel != nullptr) channel->AddWatcher(delta);
  absl::MutexLock lock(&mu_);
  watchers_ += delta;
  if (on_watchers_) on_watchers_(watchers_);
}

int EventHub::watchers() const {
  absl::MutexLock lock(&mu_);
  return watchers_;
}

}  // namespace vramlab::server
