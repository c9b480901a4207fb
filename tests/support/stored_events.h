// What the daemon's store holds, read with Debian's sqlite3 beside the running daemon (tests that
// use it carry the needs-sqlite3 label). A watch shows events as they are published, before the
// batched writer commits them: a test that kills the daemon (SIGKILL) after seeing an event waits
// here first, or the kill may lose what the watch showed.
#ifndef VRAMLAB_TESTS_SUPPORT_STORED_EVENTS_H_
#define VRAMLAB_TESTS_SUPPORT_STORED_EVENTS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {

// Waits (up to a minute) until the store holds `id`'s events up to `sequence`; false if it never
// does.
inline bool WaitUntilStored(const DaemonHarness& daemon, const std::string& id, int64_t sequence) {
  const std::string query =
      "SELECT COALESCE(MAX(sequence), 0) FROM events WHERE experiment_id = '" + id + "'";
  for (int i = 0; i < 600; ++i) {
    const ChildResult stored =
        RunChild({.argv = {"sqlite3", "-readonly", daemon.data_dir() + "/vramlab.db", query},
                  .stderr_file = "/dev/null"});
    if (stored.exit_code == 0 && !stored.out.empty() && std::stoll(stored.out) >= sequence) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_STORED_EVENTS_H_
