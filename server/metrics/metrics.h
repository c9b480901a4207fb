// Prometheus exporter of the daemon (prometheus-cpp, on --metrics-listen). The daemon feeds it from
// the same events that WatchExperiment streams, so a scrape and a watch agree.
// Thread-safe: every method may be called from any thread.
#ifndef VRAMLAB_SERVER_METRICS_METRICS_H_
#define VRAMLAB_SERVER_METRICS_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/metrics/metrics_http_server.h"
#include "vramlab/v1/experiment.pb.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// What the daemon could not yet write to its store (see Engine: durability).
struct StoreHealth {
  bool writable = true;
  int64_t pending_experiment_states = 0;  // final states held in memory, being retried
  int64_t pending_events = 0;             // events held in memory, being retried
  int64_t write_failures = 0;             // failed experiment-state writes since start
  int64_t events_not_stored = 0;          // events given up since start
};

class Metrics {
 public:
  // Starts serving /metrics on options.listen_address ("127.0.0.1:9464"; port 0 picks a free one).
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const MetricsHttpOptions& options);
  // The same with the default connection limits and timeout.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& listen_address);
  // A registry without an HTTP endpoint, for tests and for a daemon run without metrics.
  static std::unique_ptr<Metrics> CreateUnexposed();
  virtual ~Metrics() = default;

  // The port the exposer listens on (0 when unexposed).
  virtual int port() const = 0;
  // The metrics in Prometheus text format, as a scrape would return them.
  virtual std::string Serialize() const = 0;

  // Slots (GPU or CPU) the daemon owns, with the device's total memory.
  virtual void SetSlot(int slot, int64_t device_total_bytes) = 0;
  // What identifies a GPU to other exporters: with a UUID, the slot's series gain the labels
  // `UUID`, `modelName` and `Hostname` as dcgm-exporter names them (a CPU slot has no UUID and
  // keeps `gpu` alone).
  virtual void SetSlotIdentity(int slot, const std::string& uuid, const std::string& model_name) {}
  // A worker sample or phase-boundary sample of the experiment running on `slot`.
  virtual void OnSample(int slot, const vramlab::v1::MemorySample& sample) = 0;
  virtual void OnStepResult(int slot, const vramlab::v1::StepResult& step) = 0;
  // Adds vramlab_experiment_running_info{gpu, experiment, owner, name} 1 and the slot's limit;
  // called for each slot of a parallel run.
  virtual void OnExperimentStarted(int slot, const vramlab::v1::Experiment& experiment) = 0;
  // Counts vramlab_experiments_total{outcome} and, if `experiment` is the one running on `slot`,
  // removes its _info series and zeroes the slot's allocator gauges. Call it for every
  // experiment that reaches a final state, also one cancelled while queued (any slot, e.g. -1).
  virtual void OnExperimentFinished(int slot, const vramlab::v1::Experiment& experiment) = 0;
  // The same for an experiment that held several slots (a parallel run's GPUs): counted once,
  // and its _info series ended on each of them.
  virtual void OnExperimentFinishedOnSlots(const std::vector<int>& slots,
                                           const vramlab::v1::Experiment& experiment) = 0;
  virtual void SetQueueDepth(vramlab::v1::Priority priority, int depth) = 0;
  virtual void SetWatchers(int watchers) = 0;
  // A worker process ended abnormally (signal, killed for output, time limit).
  virtual void OnWorkerAbnormalExit() = 0;
  // A call refused for a missing, malformed or unknown token.
  virtual void OnAuthFailure() = 0;
  // A call refused because its address failed authentication too often (AuthThrottle).
  virtual void OnAuthThrottled() = 0;
  // vramlab_store_writable, vramlab_store_pending{kind}, vramlab_store_write_failures_total,
  // vramlab_events_not_stored_total.
  virtual void SetStoreHealth(const StoreHealth& health) = 0;
  // vramlab_store_size_bytes{part="database"|"files"}: the database's pages in use and the
  // experiments' files under the data directory.
  virtual void SetStoreSize(int64_t database_bytes, int64_t file_bytes) = 0;
  // vramlab_experiments_deleted_total{reason}: "request", "retention_age", "retention_size".
  virtual void OnExperimentDeleted(const std::string& reason) = 0;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_METRICS_H_
