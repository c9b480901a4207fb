#include "server/supervise/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace vramlab::server {
namespace {

// Pipe fds are moved to high numbers so the child's dup2 onto 0..4 can never clobber a source.
constexpr int kHighFd = 100;

int MoveHigh(int fd) {
  int high = fcntl(fd, F_DUPFD_CLOEXEC, kHighFd);
  close(fd);
  return high;
}

struct Pipe {
  int read = -1;
  int write = -1;
  bool Open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    read = MoveHigh(fds[0]);
    write = MoveHigh(fds[1]);
    return read >= 0 && write >= 0;
  }
  void Close() {
    if (read >= 0) close(read);
    if (write >= 0) close(write);
    read = write = -1;
  }
};

}  // namespace

std::vector<std::string> EnvironmentWith(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const std::string& entry : overrides) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      env.erase(entry);
    } else {
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  std::vector<std::string> result;
  for (const auto& [key, value] : env) result.push_back(key + "=" + value);
  return result;
}

absl::StatusOr<SpawnedProcess> SpawnWorkerProcess(const SpawnRequest& request) {
  // Everything the child needs is built before fork: after fork only async-signal-safe calls.
  std::vector<std::string> args_storage = {request.argv0.empty() ? request.path : request.argv0};
  args_storage.insert(args_storage.end(), request.args.begin(), request.args.end());
  std::vector<char*> argv;
  for (auto& a : args_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = request.env;
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  Pipe events, log, exec_error;
  int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!events.Open() || !log.Open() || !exec_error.Open() || dev_null < 0) {
    events.Close();
    log.Close();
    exec_error.Close();
    if (dev_null >= 0) close(dev_null);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  dev_null = MoveHigh(dev_null);
  const char* working_dir = request.working_dir.empty() ? nullptr : request.working_dir.c_str();
  const bool switch_user = request.uid.has_value() && request.gid.has_value();
  const uid_t uid = switch_user ? *request.uid : 0;
  const gid_t gid = switch_user ? *request.gid : 0;
  // The child reports a failure before exec as {stage, errno} on the exec-error pipe.
  enum Stage : int { kStageExec = 0, kStageChdir = 1, kStageUser = 2 };

  // Above every fd the child sets up, so its dup2s never clobber it.
  int extra_fd = -1;
  const int extra_fd_target = request.extra_fd_target;
  if (request.extra_fd >= 0) {
    if (extra_fd_target <= kWorkerEventsFd + 1 || extra_fd_target >= kHighFd) {
      events.Close();
      log.Close();
      exec_error.Close();
      close(dev_null);
      return absl::InternalError("spawn: extra fd target out of range");
    }
    extra_fd = fcntl(request.extra_fd, F_DUPFD_CLOEXEC, kHighFd);
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    auto fail = [&](int stage) {
      int report[2] = {stage, errno};
      (void)!write(exec_error.write, report, sizeof(report));
      _exit(127);
    };
    setpgid(0, 0);
    // While still root: joining a cgroup needs write access to its cgroup.procs.
    if (request.cgroup_fd >= 0) (void)!write(request.cgroup_fd, "0", 1);
    // Before PR_SET_PDEATHSIG: a change of credentials clears it.
    if (switch_user) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0 || getuid() == 0) {
        fail(kStageUser);
      }
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    if (working_dir != nullptr && chdir(working_dir) != 0) fail(kStageChdir);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the daemon died before prctl took effect
    // The daemon blocks termination signals in its threads; the worker must not inherit that.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGHUP}) signal(sig, SIG_DFL);
    dup2(dev_null, 0);
    dup2(log.write, 1);
    dup2(log.write, 2);
    dup2(events.write, kWorkerEventsFd);
    dup2(exec_error.write, kWorkerEventsFd + 1);
    fcntl(kWorkerEventsFd + 1, F_SETFD, FD_CLOEXEC);
    int keep_below = kWorkerEventsFd + 2;
    if (extra_fd >= 0) {
      dup2(extra_fd, extra_fd_target);
      keep_below = extra_fd_target + 1;
    }
    syscall(SYS_close_range, keep_below, ~0U, 0);
    execve(request.path.c_str(), argv.data(), envp.data());
    int report[2] = {kStageExec, errno};
    (void)!write(kWorkerEventsFd + 1, report, sizeof(report));
    _exit(127);
  }
  int fork_errno = errno;
  close(dev_null);
  if (extra_fd >= 0) close(extra_fd);
  close(events.write);
  close(log.write);
  close(exec_error.write);
  if (pid < 0) {
    close(events.read);
    close(log.read);
    close(exec_error.read);
    return absl::InternalError(absl::StrCat("fork: ", strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also from the parent, so a signal sent right away reaches the group

  // Blocks only until exec succeeds (the close-on-exec pipe closes) or fails (errno arrives).
  int report[2] = {0, 0};
  ssize_t n;
  do {
    n = read(exec_error.read, report, sizeof(report));
  } while (n < 0 && errno == EINTR);
  close(exec_error.read);
  if (n == sizeof(report)) {
    waitpid(pid, nullptr, 0);
    close(events.read);
    close(log.read);
    const std::string error = strerror(report[1]);
    switch (report[0]) {
      case kStageChdir:
        return absl::FailedPreconditionError(
            absl::StrCat("working directory ", request.working_dir, ": ", error));
      case kStageUser:
        return absl::FailedPreconditionError(
            absl::StrCat("switching to uid ", uid, " gid ", gid, ": ", error));
      default:
        return absl::FailedPreconditionError(absl::StrCat("exec ", request.path, ": ", error));
    }
  }
  fcntl(events.read, F_SETFL, fcntl(events.read, F_GETFL) | O_NONBLOCK);
  fcntl(log.read, F_SETFL, fcntl(log.read, F_GETFL) | O_NONBLOCK);
  return SpawnedProcess{pid, events.read, log.read};
}

}  // namespace vramlab::server
