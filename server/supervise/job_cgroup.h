// A cgroup (v2) per command process: the process joins it before exec, and everything it starts
// stays in it whatever session, process group or environment it gives itself, so the supervisor
// can end all of them (cgroup.kill) and knows when none is left (cgroup.events). It closes the
// escape that process tags leave open (tagged_processes.h: a process that leaves its group and
// clears its environment). Tags stay the fallback where no cgroup v2 directory is writable (a
// container with a read-only /sys/fs/cgroup, a daemon that is not root).
//
// Jobs go under <the cgroup2 mount>/<the daemon's own v2 cgroup>/vramlab-jobs/. Used only by the
// supervisor thread.
#ifndef VRAMLAB_SERVER_SUPERVISE_JOB_CGROUP_H_
#define VRAMLAB_SERVER_SUPERVISE_JOB_CGROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vramlab::server {

class JobCgroup {
 public:
  // The directory jobs go under for this process, created if missing: from /proc/self/mountinfo
  // (the cgroup2 mount) and /proc/self/cgroup (the "0::PATH" line). FAILED_PRECONDITION naming
  // why when there is no cgroup v2 or it cannot be written.
  static absl::StatusOr<std::string> JobsDirectory();

  // Makes `parent`/`name`, with cgroup.procs opened for the child to join by (procs_fd).
  static absl::StatusOr<std::unique_ptr<JobCgroup>> Create(const std::string& parent,
                                                           const std::string& name);
  ~JobCgroup();  // closes procs_fd; kills what is left and removes the directory
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& path() const { return path_; }
  // Open for writing; a process that writes "0" to it joins the cgroup (SpawnRequest::cgroup_fd).
  int procs_fd() const { return procs_fd_; }
  // Closes procs_fd once the process has joined (it stays valid for the directory's life).
  void CloseProcsFd();

  // The pids in it now.
  std::vector<int> Pids() const;
  // Whether `pid` is in it.
  bool Holds(int pid) const;
  // Sends `signal` to every process in it; SIGKILL through cgroup.kill where the kernel has it,
  // which also reaches processes started meanwhile. How many were signalled (cgroup.kill: 1).
  int Signal(int signal) const;
  // Whether no process is left (cgroup.events "populated 0").
  bool Empty() const;

 private:
  JobCgroup(std::string path, int procs_fd) : path_(std::move(path)), procs_fd_(procs_fd) {}
  std::string path_;
  int procs_fd_ = -1;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_JOB_CGROUP_H_
