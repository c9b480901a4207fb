// The processes a command experiment leaves outside its process group. A command's program may
// start processes in a session of their own (setsid, subprocess's start_new_session), which a
// signal to its process group does not reach. Each process of a command inherits a tag in its
// environment (kProcessTagName=<experiment id>/<rank>/<nonce>); the supervisor finds them by it,
// among the processes of the command user, and signals them with the group. The nonce, new at
// every launch, keeps the tags of two daemons on one host (whose ids both start at exp-000001)
// and of an experiment's earlier launches apart.
//
// A process that empties or replaces its environment before it execs escapes this; the job's
// cgroup (job_cgroup.h) holds it where the daemon can make one. Reading another user's
// /proc/PID/environ needs the daemon to be root (or hold CAP_SYS_PTRACE): without it nothing is
// found.
#ifndef VRAMLAB_SERVER_SUPERVISE_TAGGED_PROCESSES_H_
#define VRAMLAB_SERVER_SUPERVISE_TAGGED_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>

#include <string>
#include <vector>

namespace vramlab::server {

inline constexpr char kProcessTagName[] = "VRAMLAB_PROCESS_TAG";

// "VRAMLAB_PROCESS_TAG=exp-000042/1/<16 hex digits>", `nonce` as 16 hex digits.
std::string ProcessTagEntry(const std::string& experiment_id, int rank, uint64_t nonce);

// A nonce for ProcessTagEntry from the system's random source.
uint64_t NewProcessTagNonce();

// True when `environ` (a /proc/PID/environ image: "KEY=value" entries, each ended by NUL) holds
// exactly the entry `entry`.
bool EnvironHolds(const std::string& environ, const std::string& entry);

// The pids, other than this process's, of every process owned by `uid` whose environment holds
// `entry`, from a scan of `proc_root` (normally "/proc").
std::vector<pid_t> FindTaggedProcesses(uid_t uid, const std::string& entry,
                                       const std::string& proc_root = "/proc");

// Sends `signal` to each process FindTaggedProcesses returns; how many were signalled.
int SignalTaggedProcesses(uid_t uid, const std::string& entry, int signal);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SUPERVISE_TAGGED_PROCESSES_H_
