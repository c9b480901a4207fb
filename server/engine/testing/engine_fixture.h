// An Engine on CPU slots under a temporary directory, with a shell script standing in for the
// worker: the base of the Engine's process tests (engine_gang_fixture.h, engine_storage_test.cc).
// The directory and everything the Engine wrote there are removed after each test.
#ifndef VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_FIXTURE_H_
#define VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_FIXTURE_H_

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "server/config/gpu_discovery.h"
#include "server/engine/engine.h"
#include "server/metrics/metrics.h"

namespace vramlab::server::testing {

class EngineFixture : public ::testing::Test {
 protected:
  using Experiment = vramlab::v1::Experiment;

  void SetUp() override {
    char tmpl[] = "/tmp/engine-test-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    engine_.reset();
    std::filesystem::remove_all(root_);
  }

  // Writes ROOT/worker.sh: "#!/bin/sh", then `body`; executable. Returns its path.
  std::string WriteWorker(const std::string& body) const {
    const std::string path = root_ + "/worker.sh";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }
  // What every test starts from: the store in ROOT/data, `worker`, `slots` CPU slots, no grace
  // period at shutdown.
  EngineOptions BaseOptions(const std::string& worker, int slots) const {
    EngineOptions options;
    options.data_dir = root_ + "/data";
    options.worker_path = worker;
    options.slots = CpuSlots(slots);
    options.shutdown_grace_period = absl::ZeroDuration();
    return options;
  }
  // Creates and starts the Engine (a fatal failure when it cannot).
  void CreateAndStart(const EngineOptions& options) {
    metrics_ = Metrics::CreateUnexposed();
    auto engine = Engine::Create(options, metrics_.get());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    ASSERT_TRUE(engine_->Start().ok());
  }
  // The experiment once `done` holds for it, or as it is after `timeout`.
  Experiment WaitUntil(const std::string& id, const std::function<bool(const Experiment&)>& done,
                       absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      auto experiment = engine_->Get(id);
      EXPECT_TRUE(experiment.ok()) << experiment.status();
      if (done(*experiment) || absl::Now() > deadline) return *experiment;
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  std::string root_;
  Principal user_{"alice", false};
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace vramlab::server::testing

#endif  // VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_FIXTURE_H_
