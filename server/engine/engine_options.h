// Configuration of the Engine, filled from flags by main.cc.
#ifndef VRAMLAB_SERVER_ENGINE_ENGINE_OPTIONS_H_
#define VRAMLAB_SERVER_ENGINE_ENGINE_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/config/slot.h"
#include "server/spec/command_spec.h"
#include "server/spec/host_paths.h"
#include "server/spec/spec_limits.h"
#include "server/store/store.h"
#include "server/supervise/gpu_memory_reader.h"
#include "server/supervise/running_worker.h"
#include "vramlab/v1/memory.pb.h"

namespace vramlab::server {

// What the daemon deletes on its own (docs/DAEMON.md, "Retention"). Only finished experiments,
// oldest end first; never a queued or running one.
struct RetentionOptions {
  // Delete experiments that ended longer ago than this; zero: keep them.
  absl::Duration retain = absl::ZeroDuration();
  // While the database and the experiments' files take more than this, delete the oldest
  // finished experiment; 0: no bound.
  int64_t max_store_bytes = 0;
  // How often the policy is applied (and the store size metric refreshed).
  absl::Duration interval = absl::Minutes(1);
};

struct EngineOptions {
  std::string data_dir;
  std::string worker_path;
  vramlab::v1::DeviceKind device = vramlab::v1::CPU;
  std::vector<Slot> slots;
  int max_queued_per_user = 100;
  int max_queued_total = 1000;
  int default_time_limit_seconds = 3600;
  int max_time_limit_seconds = 86400;
  bool requeue_interrupted = false;
  // Running workers get this long to finish on their own at shutdown before they are stopped.
  absl::Duration shutdown_grace_period = absl::Seconds(10);
  SpecLimits spec_limits;
  // Where a spec may name host paths; the worker is confined to the same directories.
  HostPathPolicy host_paths;
  WorkerLimits worker_limits;
  bool auth_enabled = false;
  // Whether and how submitters' own programs run (spec.command); refused by default.
  CommandPolicy commands;
  // Reads the GPU driver for command jobs whose probe says nothing (server/supervise/
  // driver_view.h); null: such jobs report nothing.
  std::shared_ptr<GpuMemoryReader> gpu_memory_reader;
  StoreOptions store;
  RetentionOptions retention;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_ENGINE_ENGINE_OPTIONS_H_
