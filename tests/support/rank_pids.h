// The worker processes a real daemon started for a parallel run, read from its stderr lines
// "ID rank R started (worker pid P)" (server/engine/engine_worker_events.cc), and a wait for a
// process to be gone. For the tests of gangs through the daemon.
#ifndef VRAMLAB_TESTS_SUPPORT_RANK_PIDS_H_
#define VRAMLAB_TESTS_SUPPORT_RANK_PIDS_H_

#include <errno.h>
#include <signal.h>
#include <sys/types.h>

#include <map>
#include <regex>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {

// The worker pid of each rank of `id` in the daemon's log after the first occurrence of `after`
// (from the start when empty; nothing when `after` does not occur); a later start of a rank wins.
inline std::map<int, pid_t> RankPids(const DaemonHarness& daemon, const std::string& id,
                                     const std::string& after = "") {
  std::map<int, pid_t> pids;
  const std::string log = daemon.ReadLog();
  const size_t from = after.empty() ? 0 : log.find(after);
  if (from == std::string::npos) return pids;
  const std::regex line(id + " rank ([0-9]+) started \\(worker pid ([0-9]+)\\)");
  for (auto it =
           std::sregex_iterator(log.begin() + static_cast<std::ptrdiff_t>(from), log.end(), line);
       it != std::sregex_iterator(); ++it) {
    pids[std::stoi((*it)[1])] = static_cast<pid_t>(std::stol((*it)[2]));
  }
  return pids;
}

// RankPids once `ranks` ranks have started (or 30 s have passed).
inline std::map<int, pid_t> WaitForRankPids(const DaemonHarness& daemon, const std::string& id,
                                            const std::string& after = "", size_t ranks = 2) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::map<int, pid_t> pids = RankPids(daemon, id, after);
  while (pids.size() < ranks && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    pids = RankPids(daemon, id, after);
  }
  return pids;
}

inline bool Gone(pid_t pid, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_RANK_PIDS_H_
