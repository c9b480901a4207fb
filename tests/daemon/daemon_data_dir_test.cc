// The data directory belongs to one daemon, and a store the daemon could not keep is refused at
// start: a second daemon on the same directory or the same port, a database with garbage in its
// middle, an empty database beside experiment directories, a read-only database.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using vramlab::v1::Experiment;

namespace fs = std::filesystem;

const std::vector<std::string> kFlags = {"--cpu-slots=1", "--enable-fault-injection",
                                         "--cancel-grace-period=2s"};

std::string Db(const DaemonHarness& daemon) { return daemon.data_dir() + "/vramlab.db"; }

// A daemon whose store holds a few finished experiments, stopped: its database is checkpointed.
std::unique_ptr<DaemonHarness> StoppedDaemonWithHistory(int experiments) {
  auto daemon = DaemonHarness::Start({.extra_flags = kFlags});
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  for (int i = 0; i < experiments; ++i) {
    auto submitted = Submit(*stub, TinySpec());
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    EXPECT_TRUE(WaitForFinalState(*stub, submitted->id()).ok());
  }
  EXPECT_TRUE((*daemon)->Stop().ok());
  return std::move(*daemon);
}

// A daemon with a hanging experiment running and a tiny one queued behind it.
struct BusyDaemon {
  std::unique_ptr<DaemonHarness> daemon;
  std::string running_id;
  std::string queued_id;
};

void StartBusyDaemon(BusyDaemon* busy) {
  auto daemon = DaemonHarness::Start({.extra_flags = kFlags});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  busy->daemon = std::move(*daemon);
  auto stub = busy->daemon->NewStub();
  vramlab::v1::ExperimentSpec hanging = TinySpec();
  hanging.set_fault(vramlab::v1::HANG);
  auto running = Submit(*stub, hanging);
  ASSERT_TRUE(running.ok()) << running.status();
  busy->running_id = running->id();
  ASSERT_TRUE(WaitForState(*stub, running->id(), Experiment::RUNNING).ok());
  auto queued = Submit(*stub, TinySpec());
  ASSERT_TRUE(queued.ok()) << queued.status();
  busy->queued_id = queued->id();
}

// The first daemon's hanging experiment cancels and its queued one then runs, once.
void ExpectTheFirstDaemonCarriesOn(vramlab::v1::VramlabService::Stub& stub,
                                   const std::string& running_id, const std::string& queued_id) {
  ASSERT_TRUE(Cancel(stub, running_id).ok());
  auto ended = WaitForFinalState(stub, running_id);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), Experiment::CANCELLED);
  auto next = WaitForFinalState(stub, queued_id);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->state(), Experiment::SUCCEEDED);
  EXPECT_EQ(next->attempts(), 0);
}

TEST(DaemonDataDirTest, SecondDaemonOnTheSameDataDirIsRefusedNamingThePid) {
  BusyDaemon first;
  ASSERT_NO_FATAL_FAILURE(StartBusyDaemon(&first));
  auto stub = first.daemon->NewStub();

  auto second = DaemonHarness::Start({.extra_flags = kFlags, .data_dir = first.daemon->data_dir()});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              AllOf(HasSubstr("in use by another vramlabd"),
                    HasSubstr("pid " + std::to_string(first.daemon->pid()))));

  // The first daemon's experiments are untouched: still running, still queued, run once.
  grpc::ClientContext context;
  vramlab::v1::GetExperimentRequest request;
  request.set_id(first.running_id);
  Experiment now;
  ASSERT_TRUE(stub->GetExperiment(&context, request, &now).ok());
  EXPECT_EQ(now.state(), Experiment::RUNNING);
  ExpectTheFirstDaemonCarriesOn(*stub, first.running_id, first.queued_id);
}

// The lock file can be removed while its daemon runs; the store itself stays locked, so a second
// daemon still cannot open it, and the first one's experiments run once.
TEST(DaemonDataDirTest, RemovingTheLockFileDoesNotLetASecondDaemonOpenTheStore) {
  BusyDaemon first;
  ASSERT_NO_FATAL_FAILURE(StartBusyDaemon(&first));
  auto stub = first.daemon->NewStub();
  ASSERT_TRUE(fs::remove(first.daemon->data_dir() + "/vramlabd.lock"));

  auto second = DaemonHarness::Start({.extra_flags = kFlags, .data_dir = first.daemon->data_dir()});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              AllOf(HasSubstr("the store " + Db(*first.daemon) + " is in use by another vramlabd"),
                    HasSubstr("vramlabd.lock was removed or replaced")));

  ExpectTheFirstDaemonCarriesOn(*stub, first.running_id, first.queued_id);
}

// One stored record that does not parse is shown as damaged in a listing, by its id, owner and
// state; the others are listed whole, and a Get of the damaged one says DATA_LOSS naming it.
TEST(DaemonDataDirTest, ADamagedRecordDoesNotHideTheOthersFromTheListing) {
  std::unique_ptr<DaemonHarness> daemon = StoppedDaemonWithHistory(3);
  const ChildResult updated =
      RunChild({.argv = {"sqlite3", Db(*daemon),
                         "UPDATE experiments SET experiment = x'ffffffff0f' WHERE seq = 2"},
                .stderr_with_stdout = true});
  ASSERT_EQ(updated.exit_code, 0) << updated.Describe() << ": " << updated.out;
  ASSERT_TRUE(daemon->Restart().ok()) << daemon->ReadLog();
  auto stub = daemon->NewStub();
  grpc::ClientContext context;
  vramlab::v1::ListExperimentsRequest request;
  vramlab::v1::ListExperimentsResponse response;
  grpc::Status listed = stub->ListExperiments(&context, request, &response);
  ASSERT_TRUE(listed.ok()) << listed.error_message();
  ASSERT_EQ(response.experiments_size(), 3);
  EXPECT_EQ(response.experiments(0).id(), "exp-000003");
  EXPECT_EQ(response.experiments(0).state(), Experiment::SUCCEEDED);
  EXPECT_TRUE(response.experiments(0).has_spec());
  const Experiment& damaged = response.experiments(1);
  EXPECT_EQ(damaged.id(), "exp-000002");
  EXPECT_EQ(damaged.state(), Experiment::SUCCEEDED);
  EXPECT_FALSE(damaged.owner().empty());
  EXPECT_THAT(damaged.state_reason(), HasSubstr("does not parse (the database is damaged)"));
  EXPECT_EQ(response.experiments(2).id(), "exp-000001");
  EXPECT_TRUE(response.experiments(2).has_spec());

  grpc::ClientContext get_context;
  vramlab::v1::GetExperimentRequest get;
  get.set_id("exp-000002");
  Experiment ignored;
  grpc::Status got = stub->GetExperiment(&get_context, get, &ignored);
  EXPECT_EQ(got.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(got.error_message(), HasSubstr("row 2 does not parse"));
}

TEST(DaemonDataDirTest, SecondDaemonOnTheSamePortIsRefused) {
  auto first = DaemonHarness::Start({.extra_flags = kFlags});
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<std::string> flags = kFlags;
  flags.push_back("--listen=" + (*first)->address());
  auto second = DaemonHarness::Start({.extra_flags = flags});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("cannot listen on " + (*first)->address()));
  // The first one still answers alone.
  auto stub = (*first)->NewStub();
  auto submitted = Submit(*stub, TinySpec());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto done = WaitForFinalState(*stub, submitted->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), Experiment::SUCCEEDED);
}

TEST(DaemonDataDirTest, DatabaseWithGarbageInTheMiddleIsRefusedWithARecoveryCommand) {
  auto daemon = StoppedDaemonWithHistory(3);
  uintmax_t size = fs::file_size(Db(*daemon));
  ASSERT_GE(size, 3u * 4096) << "the store should span several pages";
  {
    std::fstream db(Db(*daemon), std::ios::in | std::ios::out | std::ios::binary);
    db.seekp(static_cast<std::streamoff>((size / 2) / 4096 * 4096));
    std::string garbage(4096, '\0');
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 131 + 7);
    db.write(garbage.data(), garbage.size());
  }
  absl::Status restarted = daemon->Restart();
  ASSERT_FALSE(restarted.ok());
  EXPECT_THAT(std::string(restarted.message()),
              AllOf(HasSubstr("is damaged"), HasSubstr("sqlite3 vramlab.db .recover")));
}

TEST(DaemonDataDirTest, EmptyDatabaseBesideExperimentDirectoriesIsRefused) {
  auto daemon = StoppedDaemonWithHistory(1);
  std::string spec_before;
  {
    std::ifstream in(daemon->data_dir() + "/experiments/exp-000001/spec.json");
    spec_before.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_FALSE(spec_before.empty());
  fs::remove(Db(*daemon) + "-wal");
  fs::remove(Db(*daemon) + "-shm");
  fs::resize_file(Db(*daemon), 0);
  absl::Status restarted = daemon->Restart();
  ASSERT_FALSE(restarted.ok());
  EXPECT_THAT(std::string(restarted.message()),
              AllOf(HasSubstr("is empty (0 bytes)"), HasSubstr("1 experiment directories")));
  fs::remove(Db(*daemon));
  restarted = daemon->Restart();
  ASSERT_FALSE(restarted.ok());
  EXPECT_THAT(std::string(restarted.message()), HasSubstr("is missing"));
  std::ifstream in(daemon->data_dir() + "/experiments/exp-000001/spec.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), spec_before);
}

TEST(DaemonDataDirTest, ReadOnlyDatabaseIsRefused) {
  auto daemon = StoppedDaemonWithHistory(1);
  ASSERT_EQ(chmod(Db(*daemon).c_str(), 0444), 0);
  absl::Status restarted = daemon->Restart();
  ASSERT_FALSE(restarted.ok());
  EXPECT_THAT(std::string(restarted.message()),
              AllOf(HasSubstr("the store is read-only"), HasSubstr(Db(*daemon))));
  // Writable again: it starts and shows the old experiment.
  ASSERT_EQ(chmod(Db(*daemon).c_str(), 0600), 0);
  ASSERT_TRUE(daemon->Restart().ok());
  auto stub = daemon->NewStub();
  auto old = WaitForFinalState(*stub, "exp-000001", absl::Seconds(5));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->state(), Experiment::SUCCEEDED);
}

TEST(DaemonDataDirTest, ExperimentDirectoryUnknownToTheStoreIsNotReused) {
  auto daemon = DaemonHarness::Start({.extra_flags = kFlags});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::string stray = (*daemon)->data_dir() + "/experiments/exp-000001";
  fs::create_directories(stray);
  { std::ofstream(stray + "/worker.log") << "an older run's log\n"; }
  auto stub = (*daemon)->NewStub();
  auto submitted = Submit(*stub, TinySpec());
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->id(), "exp-000002");
  ASSERT_TRUE(WaitForFinalState(*stub, submitted->id()).ok());
  std::ifstream in(stray + "/worker.log");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "an older run's log\n");
}

}  // namespace
}  // namespace vramlab::testing
