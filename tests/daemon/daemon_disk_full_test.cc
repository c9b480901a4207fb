// The data directory's disk fills while an experiment runs: the run's SUCCEEDED is shown (flagged
// as pending storage), its watch ends, new submissions are refused with RESOURCE_EXHAUSTED naming
// the disk, and once space is freed the final state and every event are stored — they survive a
// kill -9 after that.
//
// As root the data directory is a small tmpfs that the test really fills; otherwise the daemon's
// test-only --fail-store-writes-while-exists stands in for the full disk.
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::HasSubstr;
using vramlab::v1::Experiment;

namespace fs = std::filesystem;

// A data directory whose disk can be filled and freed.
class FillableDisk {
 public:
  FillableDisk() {
    char tmpl[] = "/tmp/vramlab-full-disk-XXXXXX";
    root_ = mkdtemp(tmpl);
    data_dir_ = root_ + "/data";
    fs::create_directories(data_dir_);
    mounted_ =
        geteuid() == 0 && mount("tmpfs", data_dir_.c_str(), "tmpfs", 0, "size=16m,mode=0700") == 0;
  }
  ~FillableDisk() {
    if (mounted_) umount2(data_dir_.c_str(), MNT_DETACH);
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  bool real() const { return mounted_; }
  const std::string& data_dir() const { return data_dir_; }
  std::vector<std::string> DaemonFlags() const {
    std::vector<std::string> flags = {"--cpu-slots=1"};
    if (!mounted_) flags.push_back("--fail-store-writes-while-exists=" + fault_file());
    return flags;
  }

  // Leaves no byte free on the tmpfs (or creates the fault file).
  void Fill() {
    if (!mounted_) {
      ASSERT_TRUE(std::ofstream(fault_file()).good());
      return;
    }
    int fd = open(filler().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::string chunk(1 << 20, 'x');
    for (size_t size = chunk.size(); size > 0; size /= 2) {
      while (write(fd, chunk.data(), size) == static_cast<ssize_t>(size)) {
      }
    }
    EXPECT_EQ(errno, ENOSPC);
    close(fd);
  }
  void Free() {
    std::error_code ignored;
    fs::remove(mounted_ ? filler() : fault_file(), ignored);
  }

 private:
  std::string filler() const { return data_dir_ + "/filler"; }
  std::string fault_file() const { return root_ + "/disk-is-full"; }

  std::string root_;
  std::string data_dir_;
  bool mounted_ = false;
};

// The first step result of `id` has arrived (the run is under way).
void WaitForFirstStep(vramlab::v1::VramlabService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  vramlab::v1::WatchExperimentRequest request;
  request.set_id(id);
  auto reader = stub.WatchExperiment(&context, request);
  vramlab::v1::ExperimentEvent event;
  while (reader->Read(&event)) {
    if (event.has_worker_event() && event.worker_event().has_step()) break;
  }
  context.TryCancel();
  reader->Finish();
}

Experiment Get(vramlab::v1::VramlabService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  vramlab::v1::GetExperimentRequest request;
  request.set_id(id);
  Experiment experiment;
  grpc::Status status = stub.GetExperiment(&context, request, &experiment);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return experiment;
}

TEST(DaemonDiskFullTest, SucceededRunIsKeptRetriedAndStoredOnceSpaceIsFreed) {
  FillableDisk disk;
  RecordProperty("full_disk", disk.real() ? "tmpfs filled" : "injected store fault");
  auto daemon = DaemonHarness::Start(
      {.extra_flags = disk.DaemonFlags(), .data_dir = disk.data_dir(), .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  auto run = Submit(*stub, TinySpec(32, /*steps=*/20));
  ASSERT_TRUE(run.ok()) << run.status();
  WaitForFirstStep(*stub, run->id());
  disk.Fill();

  // The watch ends, with the final state, although it cannot be stored.
  auto events = WatchAll(*stub, run->id());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_FALSE(events->empty());
  ASSERT_TRUE(events->back().has_state_change());
  EXPECT_EQ(events->back().state_change().state(), Experiment::SUCCEEDED);

  Experiment shown = Get(*stub, run->id());
  EXPECT_EQ(shown.state(), Experiment::SUCCEEDED);
  EXPECT_TRUE(shown.storage_pending());
  EXPECT_THAT(shown.state_reason(), HasSubstr("not stored yet"));

  auto refused = Submit(*stub, TinySpec());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(disk.data_dir()));

  disk.Free();
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (Get(*stub, run->id()).storage_pending() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_FALSE(Get(*stub, run->id()).storage_pending());

  // Stored, not just held: it survives a kill -9 with all its events.
  ASSERT_TRUE((*daemon)->Kill().ok());
  ASSERT_TRUE((*daemon)->Restart().ok());
  stub = (*daemon)->NewStub();
  Experiment stored = Get(*stub, run->id());
  EXPECT_EQ(stored.state(), Experiment::SUCCEEDED);
  EXPECT_FALSE(stored.storage_pending());
  EXPECT_EQ(stored.events_not_stored(), 0);
  auto replayed = WatchAll(*stub, run->id());
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_EQ(replayed->size(), events->size());

  auto accepted = Submit(*stub, TinySpec());
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  auto done = WaitForFinalState(*stub, accepted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::SUCCEEDED);
}

}  // namespace
}  // namespace vramlab::testing
