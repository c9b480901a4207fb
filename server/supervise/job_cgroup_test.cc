// JobCgroup against the host's real cgroup v2 (the daemon's tests run as root): a process that
// joins, then leaves its session and clears its environment, is still listed, killed and gone;
// the directory goes with the object.
#include "server/supervise/job_cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

TEST(JobCgroupTest, HoldsWhatTheProcessStartsWhateverItDoesAndKillsIt) {
  auto dir = JobCgroup::JobsDirectory();
  ASSERT_TRUE(dir.ok()) << "needs a writable cgroup v2 (root, /sys/fs/cgroup writable): "
                        << dir.status();
  auto created = JobCgroup::Create(*dir, "job-cgroup-test-" + std::to_string(getpid()));
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<JobCgroup> cgroup = *std::move(created);
  const std::string path = cgroup->path();
  EXPECT_TRUE(cgroup->Empty());

  // As the supervisor's child does: join through procs_fd, then exec. The program starts a
  // grandchild in a session of its own with an empty environment, then exits.
  const pid_t child = fork();
  if (child == 0) {
    (void)!write(cgroup->procs_fd(), "0", 1);
    execl("/bin/sh", "sh", "-c", "setsid env -i /bin/sleep 300 & echo $! > /dev/null", nullptr);
    _exit(127);
  }
  cgroup->CloseProcsFd();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The grandchild outlived its parent and left its session; the cgroup still holds it.
  std::vector<int> pids;
  for (int i = 0; i < 100 && pids.empty(); ++i) {
    pids = cgroup->Pids();
    if (pids.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_NE(pids[0], child);
  EXPECT_FALSE(cgroup->Empty());
  EXPECT_GE(cgroup->Signal(SIGKILL), 1);
  bool empty = false;
  for (int i = 0; i < 200 && !empty; ++i) {
    empty = cgroup->Empty();
    if (!empty) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(empty) << "still in " << path;
  EXPECT_TRUE(cgroup->Pids().empty());
  cgroup.reset();
  EXPECT_FALSE(Exists(path)) << path << " outlived its JobCgroup";
}

TEST(JobCgroupTest, TheDestructorEndsWhatIsLeft) {
  auto dir = JobCgroup::JobsDirectory();
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto created = JobCgroup::Create(*dir, "job-cgroup-test-left-" + std::to_string(getpid()));
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<JobCgroup> cgroup = *std::move(created);
  const std::string path = cgroup->path();
  const pid_t child = fork();
  if (child == 0) {
    (void)!write(cgroup->procs_fd(), "0", 1);
    execl("/bin/sleep", "sleep", "300", nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100 && cgroup->Empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(cgroup->Empty());
  EXPECT_TRUE(cgroup->Holds(child));
  EXPECT_FALSE(cgroup->Holds(getpid()));
  cgroup.reset();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(Exists(path));
  // A name already taken is refused, naming the path.
  auto first = JobCgroup::Create(*dir, "job-cgroup-test-twice-" + std::to_string(getpid()));
  ASSERT_TRUE(first.ok());
  auto second = JobCgroup::Create(*dir, "job-cgroup-test-twice-" + std::to_string(getpid()));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(std::string(second.status().message()).find((*first)->path()), std::string::npos);
}

}  // namespace
}  // namespace vramlab::server
