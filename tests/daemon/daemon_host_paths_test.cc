// Host paths in specs against a real daemon and worker: a plain user cannot make the worker read
// the daemon's tokens file (or any file outside --allowed-dir) through training.data.token_ids_file
// or model.weights_dir — not directly, not through `..`, a symbolic link or a hard link — and no
// response, log, event or store line carries a file's content or a token. The worker repeats the
// check on the file it actually opened (a link swapped after submit). Files the daemon creates are
// its user's alone.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/contract/worker_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using vramlab::v1::Experiment;

constexpr char kAlice[] = "alice-secret-token-00000001";
constexpr char kAdmin[] = "admin-secret-token-00000003";
constexpr char kFileSecret[] = "TOPSECRETWORD-4242";

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class DaemonHostPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/host-paths-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    tokens_ = dir_ + "/tokens";
    allowed_ = dir_ + "/datasets";
    fs::create_directory(allowed_);
    ASSERT_TRUE(
        WriteTokensFile(tokens_, {{kAlice, "alice", "user"}, {kAdmin, "root", "admin"}}).ok());
    std::ofstream(allowed_ + "/ids.txt") << "1 2 3 4 5 6 7 8 9 10 11 12";
    std::ofstream(allowed_ + "/secret.txt") << kFileSecret << " 1 2 3";
    std::ofstream(dir_ + "/outside.txt") << "1 2 3";
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::StatusOr<std::unique_ptr<DaemonHarness>> StartDaemon(bool allow) {
    std::vector<std::string> flags = {"--cpu-slots=1", "--auth-tokens=" + tokens_};
    if (allow) flags.push_back("--allowed-dir=" + allowed_);
    return DaemonHarness::Start({.extra_flags = flags});
  }

  static vramlab::v1::ExperimentSpec WithIds(const std::string& path) {
    vramlab::v1::ExperimentSpec spec = TinySpec();
    spec.mutable_training()->mutable_data()->set_token_ids_file(path);
    return spec;
  }

  std::string dir_, tokens_, allowed_;
};

TEST_F(DaemonHostPathsTest, WithoutAllowedDirectoriesEveryHostPathIsRefused) {
  auto daemon = StartDaemon(/*allow=*/false);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  for (const std::string& path : {tokens_, std::string("/etc/shadow"),
                                  std::string("/proc/self/environ"), allowed_ + "/ids.txt"}) {
    auto submitted = Submit(*stub, WithIds(path), kAlice);
    ASSERT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(submitted.status().message(),
                HasSubstr("spec.training.data.token_ids_file: this daemon allows no host paths"));
    EXPECT_THAT(submitted.status().message(), Not(HasSubstr(kAdmin)));
  }
  vramlab::v1::ExperimentSpec weights = TinySpec();
  weights.mutable_model()->set_weights_dir(dir_);
  auto submitted = Submit(*stub, weights, kAlice);
  ASSERT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(submitted.status().message(), HasSubstr("spec.model.weights_dir"));
}

TEST_F(DaemonHostPathsTest, EscapesFromTheAllowedDirectoryAreRefused) {
  ASSERT_EQ(symlink(tokens_.c_str(), (allowed_ + "/link").c_str()), 0);
  ASSERT_EQ(symlink(dir_.c_str(), (allowed_ + "/up").c_str()), 0);
  // A hard link needs the same filesystem, which a directory beside the tokens file is.
  ASSERT_EQ(link(tokens_.c_str(), (allowed_ + "/hard.txt").c_str()), 0);
  auto daemon = StartDaemon(/*allow=*/true);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  struct Escape {
    std::string path;
    std::string why;
  };
  for (const Escape& escape : std::vector<Escape>{
           {tokens_, "not under a directory this daemon allows"},
           {allowed_ + "/../tokens", "not under a directory this daemon allows"},
           {allowed_ + "/../outside.txt", "not under a directory this daemon allows"},
           {allowed_ + "/link", "leads through a symbolic link outside"},
           {allowed_ + "/up/tokens", "leads through a symbolic link outside"},
           {allowed_ + "/hard.txt", "one of the daemon's own files"},
           {allowed_ + "/missing.txt", "does not exist"}}) {
    auto submitted = Submit(*stub, WithIds(escape.path), kAlice);
    ASSERT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument) << escape.path;
    EXPECT_THAT(submitted.status().message(), HasSubstr(escape.why)) << escape.path;
    EXPECT_THAT(submitted.status().message(), Not(HasSubstr(kAdmin)));
  }
  vramlab::v1::ExperimentSpec weights = TinySpec();
  weights.mutable_model()->set_weights_dir(allowed_ + "/up");
  EXPECT_EQ(Submit(*stub, weights, kAlice).status().code(), absl::StatusCode::kInvalidArgument);

  // A FIFO would block the worker that opens it; a file is no weights directory.
  ASSERT_EQ(mkfifo((allowed_ + "/ids.fifo").c_str(), 0600), 0);
  auto fifo = Submit(*stub, WithIds(allowed_ + "/ids.fifo"), kAlice);
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fifo.status().message(),
            "spec.training.data.token_ids_file: not a regular file on the daemon's host");
  weights.mutable_model()->set_weights_dir(allowed_ + "/ids.txt");
  auto file = Submit(*stub, weights, kAlice);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file.status().message(),
            "spec.model.weights_dir: not a directory on the daemon's host");
}

TEST_F(DaemonHostPathsTest, AllowedFileRunsAndNoFileContentOrTokenLeaks) {
  auto daemon = StartDaemon(/*allow=*/true);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();

  auto good = Submit(*stub, WithIds(allowed_ + "/./ids.txt"), kAlice);
  ASSERT_TRUE(good.ok()) << good.status();
  auto good_final = WaitForFinalState(*stub, good->id(), absl::Seconds(120), kAlice);
  ASSERT_TRUE(good_final.ok()) << good_final.status();
  EXPECT_EQ(good_final->state(), Experiment::SUCCEEDED) << good_final->state_reason();

  auto bad = Submit(*stub, WithIds(allowed_ + "/secret.txt"), kAlice);
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto bad_final = WaitForFinalState(*stub, bad->id(), absl::Seconds(120), kAlice);
  ASSERT_TRUE(bad_final.ok()) << bad_final.status();
  EXPECT_EQ(bad_final->state(), Experiment::FAILED);
  EXPECT_THAT(bad_final->state_reason(), HasSubstr("training.data.token_ids_file"));
  EXPECT_THAT(bad_final->state_reason(), HasSubstr("word 1 is not a token id"));
  EXPECT_THAT(bad_final->state_reason(), Not(HasSubstr(kFileSecret)));
  auto events = WatchAll(*stub, bad->id(), 0, absl::Seconds(60), kAlice);
  ASSERT_TRUE(events.ok()) << events.status();
  for (const auto& event : *events) EXPECT_THAT(event.DebugString(), Not(HasSubstr(kFileSecret)));

  ASSERT_TRUE((*daemon)->Stop().ok());
  // Nothing the daemon wrote — its stderr, the store, worker logs, specs — holds the file's
  // content or any token.
  std::vector<std::string> written = {(*daemon)->log_path()};
  for (const auto& entry : fs::recursive_directory_iterator((*daemon)->data_dir())) {
    if (entry.is_regular_file()) written.push_back(entry.path().string());
  }
  ASSERT_GT(written.size(), 3u);
  for (const std::string& path : written) {
    const std::string text = ReadWhole(path);
    EXPECT_THAT(text, Not(HasSubstr(kFileSecret))) << path;
    EXPECT_THAT(text, Not(HasSubstr(kAlice))) << path;
    EXPECT_THAT(text, Not(HasSubstr(kAdmin))) << path;
  }
}

TEST_F(DaemonHostPathsTest, StoreAndLogsAreTheDaemonUsersAlone) {
  auto daemon = StartDaemon(/*allow=*/true);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto stub = (*daemon)->NewStub();
  auto run = Submit(*stub, TinySpec(), kAlice);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(WaitForFinalState(*stub, run->id(), absl::Seconds(120), kAlice).ok());
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator((*daemon)->data_dir())) {
    // The harness keeps the daemon's stderr beside the data it made; the daemon did not create it.
    if (entry.path().filename().string().rfind("vramlabd-stderr-", 0) == 0) continue;
    struct stat st;
    ASSERT_EQ(lstat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << entry.path() << " mode " << std::oct << (st.st_mode & 0777);
    files += entry.is_regular_file();
  }
  EXPECT_GE(files, 3);  // the store, the spec, the worker log at least
}

TEST_F(DaemonHostPathsTest, WorkerChecksTheFileItOpensNotThePathItWasGiven) {
  // The daemon resolved and allowed this path at submit; afterwards it became a link to a file
  // outside. The confined worker refuses what it actually opened.
  ASSERT_EQ(symlink((dir_ + "/outside.txt").c_str(), (allowed_ + "/swapped.txt").c_str()), 0);
  const std::string spec =
      R"({"name":"t","model":{"preset":"tiny"},"training":{"microBatchSize":1,"gradAccumSteps":1,)"
      R"("seqLen":8,"steps":1,"dtype":"FLOAT32","data":{"tokenIdsFile":")" +
      allowed_ + R"(/swapped.txt"}},"device":"CPU"})";
  WorkerProcess confined =
      RunWorkerProcess(spec, nullptr, {"--confine-host-paths", "--allowed-dir", allowed_});
  EXPECT_EQ(confined.exit_status, 2) << confined.output;
  EXPECT_THAT(confined.output, HasSubstr("outside the directories the daemon allows"));
  // Standalone, the same spec reads the file as its user would.
  WorkerProcess standalone = RunWorkerProcess(spec);
  EXPECT_EQ(standalone.exit_status, 0) << standalone.output;
  // A denied path inside an allowed directory is refused too.
  WorkerProcess denied = RunWorkerProcess(
      spec, nullptr,
      {"--confine-host-paths", "--allowed-dir", dir_, "--denied-path", dir_ + "/outside.txt"});
  EXPECT_EQ(denied.exit_status, 2) << denied.output;
}

}  // namespace
}  // namespace vramlab::testing
