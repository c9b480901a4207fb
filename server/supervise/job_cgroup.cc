#include "server/supervise/job_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vramlab::server {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The cgroup2 mount point from /proc/self/mountinfo ("... - cgroup2 ..."), or "".
std::string Cgroup2Mount() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || !absl::StartsWith(line.substr(dash + 3), "cgroup2 ")) {
      continue;
    }
    std::vector<std::string> fields = absl::StrSplit(line.substr(0, dash), ' ');
    if (fields.size() >= 5) return fields[4];
  }
  return "";
}

bool WriteText(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::string> JobCgroup::JobsDirectory() {
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) return absl::FailedPreconditionError("no cgroup2 file system is mounted");
  std::string own;
  for (absl::string_view line : absl::StrSplit(ReadSmallFile("/proc/self/cgroup"), '\n')) {
    if (absl::StartsWith(line, "0::")) own = std::string(line.substr(3));
  }
  const std::string dir = absl::StrCat(mount, own == "/" ? "" : own, "/vramlab-jobs");
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  }
  if (access((dir + "/cgroup.procs").c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a writable cgroup"));
  }
  return dir;
}

absl::StatusOr<std::unique_ptr<JobCgroup>> JobCgroup::Create(const std::string& parent,
                                                             const std::string& name) {
  const std::string path = absl::StrCat(parent, "/", name);
  if (mkdir(path.c_str(), 0755) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  const int fd = open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    const int open_errno = errno;
    rmdir(path.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, "/cgroup.procs: ", strerror(open_errno)));
  }
  return std::unique_ptr<JobCgroup>(new JobCgroup(path, fd));
}

JobCgroup::~JobCgroup() {
  CloseProcsFd();
  // A cgroup with processes cannot be removed: they go first (each exits within a moment of
  // SIGKILL; a process in uninterruptible sleep may take longer, and then the directory stays).
  for (int i = 0; i < 50 && !Empty(); ++i) {
    Signal(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  rmdir(path_.c_str());
}

void JobCgroup::CloseProcsFd() {
  if (procs_fd_ >= 0) close(procs_fd_);
  procs_fd_ = -1;
}

std::vector<int> JobCgroup::Pids() const {
  std::vector<int> pids;
  for (absl::string_view line : absl::StrSplit(ReadSmallFile(path_ + "/cgroup.procs"), '\n')) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

bool JobCgroup::Holds(int pid) const {
  const std::vector<int> pids = Pids();
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

int JobCgroup::Signal(int signal) const {
  if (signal == SIGKILL && WriteText(path_ + "/cgroup.kill", "1")) return 1;
  int signalled = 0;
  for (int pid : Pids()) {
    if (kill(pid, signal) == 0) ++signalled;
  }
  return signalled;
}

bool JobCgroup::Empty() const {
  const std::string events = ReadSmallFile(path_ + "/cgroup.events");
  if (events.empty()) return Pids().empty();  // the directory is gone, or no cgroup.events
  return absl::StrContains(events, "populated 0");
}

}  // namespace vramlab::server
