#include "server/metrics/prometheus_metrics.h"

#include <unistd.h>

#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/metric_family_builder.h"
#include "server/metrics/metric_labels.h"
#include "server/metrics/process_metrics.h"

namespace vramlab::server {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;
using vramlab::v1::Experiment;
using vramlab::v1::MemorySample;

// The effective cap of an experiment on a slot: its own limit, else the whole device.
int64_t EffectiveLimit(int64_t spec_limit_bytes, int64_t device_total_bytes) {
  return spec_limit_bytes > 0 ? spec_limit_bytes : device_total_bytes;
}

// The host's name as gethostname(2) gives it (dcgm-exporter's Hostname label); "" if unknown.
std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

const std::vector<double>& PrometheusMetrics::StepDurationBuckets() {
  static const auto* const kBuckets = new std::vector<double>{
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
  return *kBuckets;
}

PrometheusMetrics::PrometheusMetrics() : hostname_(HostName()) {
  for (auto priority : ExportedPriorities()) queue_depth_[priority] = 0;
  for (auto state : FinalStates()) outcomes_[OutcomeLabel(state)] = 0;
}

PrometheusMetrics::~PrometheusMetrics() {
  // Stop the serving thread before any state it reads goes away.
  http_server_.reset();
}

absl::Status PrometheusMetrics::Expose(const MetricsHttpOptions& options) {
  if (http_server_ != nullptr) return absl::FailedPreconditionError("metrics already exposed");
  auto server = MetricsHttpServer::Start(options, [this] { return Serialize(); });
  if (!server.ok()) return server.status();
  http_server_ = std::move(*server);
  return absl::OkStatus();
}

int PrometheusMetrics::port() const { return http_server_ != nullptr ? http_server_->port() : 0; }

std::string PrometheusMetrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, Collect());
  return out.str();
}

PrometheusMetrics::Slot& PrometheusMetrics::SlotLocked(int slot) {
  Slot& s = slots_[slot];
  if (s.step_duration == nullptr) {
    s.step_duration = std::make_unique<prometheus::Histogram>(StepDurationBuckets());
  }
  return s;
}

void PrometheusMetrics::SetSlot(int slot, int64_t device_total_bytes) {
  absl::MutexLock lock(&mutex_);
  Slot& s = SlotLocked(slot);
  s.device_total_bytes = device_total_bytes;
  if (s.running == nullptr) s.memory_limit_bytes = device_total_bytes;
}

void PrometheusMetrics::SetSlotIdentity(int slot, const std::string& uuid,
                                        const std::string& model_name) {
  absl::MutexLock lock(&mutex_);
  Slot& s = SlotLocked(slot);
  s.uuid = uuid;
  s.model_name = model_name;
}

void PrometheusMetrics::OnSample(int slot, const MemorySample& sample) {
  absl::MutexLock lock(&mutex_);
  Slot& s = SlotLocked(slot);
  s.last_sample = sample;
  s.has_device_reading = true;
  if (sample.device_total_bytes() > 0 && s.device_total_bytes == 0) {
    s.device_total_bytes = sample.device_total_bytes();
    if (s.memory_limit_bytes == 0) s.memory_limit_bytes = s.device_total_bytes;
  }
  if (sample.has_free_block_fragmentation()) {
    s.free_block_fragmentation_ratio = sample.free_block_fragmentation_ratio();
    s.has_free_block_fragmentation = true;
  }
}

void PrometheusMetrics::OnStepResult(int slot, const vramlab::v1::StepResult& step) {
  absl::MutexLock lock(&mutex_);
  Slot& s = SlotLocked(slot);
  if (step.step_time_seconds() > 0) s.step_duration->Observe(step.step_time_seconds());
  s.tokens_per_second = step.tokens_per_second();
}

void PrometheusMetrics::OnExperimentStarted(int slot, const Experiment& experiment) {
  absl::MutexLock lock(&mutex_);
  Slot& s = SlotLocked(slot);
  // A fresh worker: nothing of the previous one's readings applies.
  s.last_sample.Clear();
  s.has_device_reading = false;
  s.has_free_block_fragmentation = false;
  s.free_block_fragmentation_ratio = 0;
  s.tokens_per_second = 0;
  s.memory_limit_bytes =
      EffectiveLimit(experiment.spec().memory().device_memory_limit_bytes(), s.device_total_bytes);
  s.running = std::make_unique<RunningExperiment>(
      RunningExperiment{experiment.id(), experiment.owner(),
                        TruncateUtf8(experiment.spec().name(), kMaxNameLabelBytes)});
}

void PrometheusMetrics::OnExperimentFinished(int slot, const Experiment& experiment) {
  OnExperimentFinishedOnSlots({slot}, experiment);
}

void PrometheusMetrics::OnExperimentFinishedOnSlots(const std::vector<int>& slots,
                                                    const Experiment& experiment) {
  absl::MutexLock lock(&mutex_);
  const std::string outcome = OutcomeLabel(experiment.state());
  if (!outcome.empty()) outcomes_[outcome] += 1;
  for (int slot : slots) {
    auto it = slots_.find(slot);
    // An experiment cancelled while queued never ran: leave whatever runs on `slot` alone.
    if (it == slots_.end() || it->second.running == nullptr ||
        it->second.running->id != experiment.id()) {
      continue;
    }
    ReleaseSlotLocked(it->second);
  }
}

void PrometheusMetrics::ReleaseSlotLocked(Slot& s) {
  s.running.reset();
  s.last_sample.Clear();
  s.has_device_reading = false;
  s.has_free_block_fragmentation = false;
  s.free_block_fragmentation_ratio = 0;
  s.tokens_per_second = 0;
  s.memory_limit_bytes = s.device_total_bytes;
}

void PrometheusMetrics::SetQueueDepth(vramlab::v1::Priority priority, int depth) {
  absl::MutexLock lock(&mutex_);
  // PRIORITY_UNSPECIFIED is queued as normal; keep one series per label value.
  if (priority == vramlab::v1::PRIORITY_UNSPECIFIED) priority = vramlab::v1::PRIORITY_NORMAL;
  queue_depth_[priority] = depth;
}

void PrometheusMetrics::SetWatchers(int watchers) {
  absl::MutexLock lock(&mutex_);
  watchers_ = watchers;
}

void PrometheusMetrics::OnWorkerAbnormalExit() {
  absl::MutexLock lock(&mutex_);
  worker_abnormal_exits_ += 1;
}

void PrometheusMetrics::OnAuthFailure() {
  absl::MutexLock lock(&mutex_);
  auth_failures_ += 1;
}

void PrometheusMetrics::OnAuthThrottled() {
  absl::MutexLock lock(&mutex_);
  auth_throttled_ += 1;
}

void PrometheusMetrics::SetStoreHealth(const StoreHealth& health) {
  absl::MutexLock lock(&mutex_);
  store_health_ = health;
}

void PrometheusMetrics::SetStoreSize(int64_t database_bytes, int64_t file_bytes) {
  absl::MutexLock lock(&mutex_);
  store_database_bytes_ = database_bytes;
  store_file_bytes_ = file_bytes;
}

void PrometheusMetrics::OnExperimentDeleted(const std::string& reason) {
  absl::MutexLock lock(&mutex_);
  deletions_[reason] += 1;
}

std::vector<MetricFamily> PrometheusMetrics::Collect() const {
  std::vector<MetricFamily> out;
  {
    absl::ReaderMutexLock lock(&mutex_);
    CollectSlots(out);
    CollectDaemon(out);
  }
  CollectProcessMetrics(out);
  return out;
}

void PrometheusMetrics::CollectSlots(std::vector<MetricFamily>& out) const {
  auto gauge = [](const char* name, const char* help) {
    return MakeFamily(name, help, MetricType::Gauge);
  };
  MetricFamily allocated = gauge("vramlab_gpu_allocated_bytes",
                                 "Bytes held by tensors in the running worker's allocator.");
  MetricFamily reserved =
      gauge("vramlab_gpu_reserved_bytes",
            "Bytes the running worker's caching allocator holds from the device.");
  MetricFamily active =
      gauge("vramlab_gpu_active_bytes",
            "Bytes in active allocator blocks (allocated plus split remainders in use).");
  MetricFamily peak = gauge("vramlab_gpu_peak_allocated_bytes",
                            "Peak allocated bytes of the running worker since its last reset.");
  MetricFamily fragmentation =
      gauge("vramlab_gpu_fragmentation_ratio", "1 - allocated/reserved: memory cached but unused.");
  MetricFamily free_block = gauge(
      "vramlab_gpu_free_block_fragmentation_ratio",
      "1 - largest_free_block/free_inside_reserved at the last phase boundary with a snapshot.");
  MetricFamily used =
      gauge("vramlab_gpu_device_used_bytes",
            "Device memory in use as the driver reports it (total - free), all processes.");
  MetricFamily total = gauge("vramlab_gpu_device_total_bytes", "Device memory in total.");
  MetricFamily limit =
      gauge("vramlab_gpu_memory_limit_bytes",
            "Memory cap of the experiment running on the slot, else the device total.");
  MetricFamily tokens = gauge("vramlab_tokens_per_second",
                              "Training throughput of the last optimizer step on the slot.");
  MetricFamily running = gauge("vramlab_experiment_running_info",
                               "The experiment running on a slot; the series ends with it.");
  MetricFamily steps =
      MakeFamily("vramlab_step_duration_seconds",
                 "Wall time of one optimizer step (all micro-batches).", MetricType::Histogram);

  for (const auto& [index, s] : slots_) {
    const std::string gpu = SlotLabel(index);
    // A GPU's series carry gpu (the index), UUID, modelName and Hostname as dcgm-exporter names
    // them, so that they join DCGM's on the same GPU (`on (UUID)` or `on (Hostname, gpu)`). A CPU
    // slot, which no DCGM series describes, has gpu alone.
    MetricLabels labels = {{"gpu", gpu}};
    if (!s.uuid.empty()) {
      labels.push_back({"UUID", s.uuid});
      if (!s.model_name.empty()) labels.push_back({"modelName", s.model_name});
      if (!hostname_.empty()) labels.push_back({"Hostname", hostname_});
    }
    const MemorySample& m = s.last_sample;
    AddValue(allocated, labels, static_cast<double>(m.allocated_bytes()));
    AddValue(reserved, labels, static_cast<double>(m.reserved_bytes()));
    AddValue(active, labels, static_cast<double>(m.active_bytes()));
    AddValue(peak, labels, static_cast<double>(m.peak_allocated_bytes()));
    AddValue(fragmentation, labels, m.fragmentation_ratio());
    if (s.has_free_block_fragmentation) {
      AddValue(free_block, labels, s.free_block_fragmentation_ratio);
    }
    if (s.has_device_reading) {
      AddValue(used, labels, static_cast<double>(m.device_used_bytes()));
    }
    AddValue(total, labels, static_cast<double>(s.device_total_bytes));
    AddValue(limit, labels, static_cast<double>(s.memory_limit_bytes));
    AddValue(tokens, labels, s.tokens_per_second);
    if (s.running != nullptr) {
      AddValue(running,
               {{"gpu", gpu},
                {"experiment", s.running->id},
                {"owner", s.running->owner},
                {"name", s.running->name}},
               1);
    }
    AddCollected(steps, labels, s.step_duration->Collect());
  }
  for (MetricFamily* family : {&allocated, &reserved, &active, &peak, &fragmentation, &free_block,
                               &used, &total, &limit, &tokens, &running, &steps}) {
    out.push_back(std::move(*family));
  }
}

void PrometheusMetrics::CollectDaemon(std::vector<MetricFamily>& out) const {
  MetricFamily queue =
      MakeFamily("vramlab_queue_depth", "Experiments waiting in the queue.", MetricType::Gauge);
  for (const auto& [priority, depth] : queue_depth_) {
    AddValue(queue, {{"priority", PriorityLabel(priority)}}, depth);
  }
  MetricFamily outcomes =
      MakeFamily("vramlab_experiments_total", "Experiments that reached a final state, by outcome.",
                 MetricType::Counter);
  for (const auto& [outcome, count] : outcomes_) AddValue(outcomes, {{"outcome", outcome}}, count);
  MetricFamily exits =
      MakeFamily("vramlab_worker_abnormal_exits_total",
                 "Worker processes that ended abnormally (signal, output violation, time limit).",
                 MetricType::Counter);
  AddValue(exits, {}, worker_abnormal_exits_);
  const StoreHealth& store = store_health_;
  MetricFamily writable =
      MakeFamily("vramlab_store_writable",
                 "1 while the data directory's store accepts writes, else 0.", MetricType::Gauge);
  AddValue(writable, {}, store.writable ? 1 : 0);
  MetricFamily pending = MakeFamily(
      "vramlab_store_pending", "Held in memory because the store could not write them; retried.",
      MetricType::Gauge);
  AddValue(pending, {{"kind", "experiment_states"}},
           static_cast<double>(store.pending_experiment_states));
  AddValue(pending, {{"kind", "events"}}, static_cast<double>(store.pending_events));
  MetricFamily failures =
      MakeFamily("vramlab_store_write_failures_total", "Experiment state writes the store refused.",
                 MetricType::Counter);
  AddValue(failures, {}, static_cast<double>(store.write_failures));
  MetricFamily lost =
      MakeFamily("vramlab_events_not_stored_total",
                 "Events given up after the store kept refusing them.", MetricType::Counter);
  AddValue(lost, {}, static_cast<double>(store.events_not_stored));
  MetricFamily size = MakeFamily("vramlab_store_size_bytes",
                                 "Bytes the data directory's store takes: the database's pages in "
                                 "use, the experiments' files.",
                                 MetricType::Gauge);
  AddValue(size, {{"part", "database"}}, static_cast<double>(store_database_bytes_));
  AddValue(size, {{"part", "files"}}, static_cast<double>(store_file_bytes_));
  MetricFamily deleted = MakeFamily("vramlab_experiments_deleted_total",
                                    "Experiments deleted, on request or by the retention policy.",
                                    MetricType::Counter);
  for (const auto& [reason, count] : deletions_) AddValue(deleted, {{"reason", reason}}, count);
  MetricFamily watchers =
      MakeFamily("vramlab_watchers", "WatchExperiment streams open now.", MetricType::Gauge);
  AddValue(watchers, {}, watchers_);
  MetricFamily auth_failures = MakeFamily(
      "vramlab_auth_failures_total", "API calls refused for a missing, malformed or unknown token.",
      MetricType::Counter);
  AddValue(auth_failures, {}, auth_failures_);
  MetricFamily auth_throttled =
      MakeFamily("vramlab_auth_throttled_total",
                 "API calls refused because their address failed authentication too often.",
                 MetricType::Counter);
  AddValue(auth_throttled, {}, auth_throttled_);
  MetricFamily build =
      MakeFamily("vramlab_build_info", "The daemon's version; always 1.", MetricType::Gauge);
  AddValue(build, {{"version", VRAMLAB_VERSION}}, 1);
  for (MetricFamily* family :
       {&queue, &outcomes, &exits, &writable, &pending, &failures, &lost, &size, &deleted,
        &watchers, &auth_failures, &auth_throttled, &build}) {
    out.push_back(std::move(*family));
  }
}

}  // namespace vramlab::server
