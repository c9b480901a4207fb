// The Metrics implementation. All state is plain data behind one mutex and Collect() copies it
// out under that mutex, so every scrape shows each slot's gauges from one and the same worker
// sample (never allocated from one sample and reserved from the next).
#ifndef VRAMLAB_SERVER_METRICS_PROMETHEUS_METRICS_H_
#define VRAMLAB_SERVER_METRICS_PROMETHEUS_METRICS_H_

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_http_server.h"

namespace vramlab::server {

class PrometheusMetrics : public Metrics {
 public:
  // Upper bounds of vramlab_step_duration_seconds: a tiny CPU step (milliseconds) up to a large
  // model's accumulation cycle on a GPU (minutes).
  static const std::vector<double>& StepDurationBuckets();
  // Longest `name` label value exported; longer experiment names are cut (UTF-8 safe).
  static constexpr size_t kMaxNameLabelBytes = 128;

  PrometheusMetrics();
  ~PrometheusMetrics() override;

  // Starts serving /metrics. Called at most once, before any scrape matters.
  absl::Status Expose(const MetricsHttpOptions& options);

  int port() const override;
  std::string Serialize() const override;
  void SetSlot(int slot, int64_t device_total_bytes) override;
  void SetSlotIdentity(int slot, const std::string& uuid, const std::string& model_name) override;
  void OnSample(int slot, const vramlab::v1::MemorySample& sample) override;
  void OnStepResult(int slot, const vramlab::v1::StepResult& step) override;
  void OnExperimentStarted(int slot, const vramlab::v1::Experiment& experiment) override;
  void OnExperimentFinished(int slot, const vramlab::v1::Experiment& experiment) override;
  void OnExperimentFinishedOnSlots(const std::vector<int>& slots,
                                   const vramlab::v1::Experiment& experiment) override;
  void SetQueueDepth(vramlab::v1::Priority priority, int depth) override;
  void SetWatchers(int watchers) override;
  void OnWorkerAbnormalExit() override;
  void OnAuthFailure() override;
  void OnAuthThrottled() override;
  void SetStoreHealth(const StoreHealth& health) override;
  void SetStoreSize(int64_t database_bytes, int64_t file_bytes) override;
  void OnExperimentDeleted(const std::string& reason) override;

  // One consistent snapshot of the daemon's metrics, then the process_* metrics.
  std::vector<prometheus::MetricFamily> Collect() const;

 private:
  struct RunningExperiment {
    std::string id;
    std::string owner;
    std::string name;
  };
  // One GPU (or CPU) slot. The allocator fields describe the worker running there and are zeroed
  // when it ends: its process, and all memory it held, is gone.
  struct Slot {
    // dcgm-exporter's UUID and modelName labels; empty where unknown (a CPU slot has no UUID).
    std::string uuid;
    std::string model_name;
    int64_t device_total_bytes = 0;
    // Effective cap of the running experiment (its limit, or the device's total).
    int64_t memory_limit_bytes = 0;
    vramlab::v1::MemorySample last_sample;
    // The driver view is known only from a worker's sample; not exported until one arrives.
    bool has_device_reading = false;
    // Snapshot-based fragmentation, carried from the last phase-boundary sample that had it.
    double free_block_fragmentation_ratio = 0;
    bool has_free_block_fragmentation = false;
    double tokens_per_second = 0;
    std::unique_ptr<RunningExperiment> running;
    std::unique_ptr<prometheus::Histogram> step_duration;
  };

  Slot& SlotLocked(int slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ends the running experiment of `s` and zeroes its allocator gauges.
  void ReleaseSlotLocked(Slot& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CollectSlots(std::vector<prometheus::MetricFamily>& out) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);
  void CollectDaemon(std::vector<prometheus::MetricFamily>& out) const
      ABSL_SHARED_LOCKS_REQUIRED(mutex_);

  // dcgm-exporter's Hostname label on every slot series; fixed at construction.
  const std::string hostname_;
  mutable absl::Mutex mutex_;
  std::map<int, Slot> slots_ ABSL_GUARDED_BY(mutex_);
  std::map<vramlab::v1::Priority, int> queue_depth_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, double> outcomes_ ABSL_GUARDED_BY(mutex_);
  int watchers_ ABSL_GUARDED_BY(mutex_) = 0;
  double worker_abnormal_exits_ ABSL_GUARDED_BY(mutex_) = 0;
  double auth_failures_ ABSL_GUARDED_BY(mutex_) = 0;
  double auth_throttled_ ABSL_GUARDED_BY(mutex_) = 0;
  StoreHealth store_health_ ABSL_GUARDED_BY(mutex_);
  int64_t store_database_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t store_file_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  // Every reason is exported from the start (at 0), so that rate() sees the first deletion.
  std::map<std::string, double> deletions_ ABSL_GUARDED_BY(mutex_) = {
      {"request", 0}, {"retention_age", 0}, {"retention_size", 0}};

  // Declared last: destroyed first, so its serving thread is gone before the state it reads.
  std::unique_ptr<MetricsHttpServer> http_server_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_PROMETHEUS_METRICS_H_
