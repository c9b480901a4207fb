#include "server/supervise/tagged_processes.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace vramlab::server {
namespace {

std::string Environ(std::initializer_list<const char*> entries) {
  std::string image;
  for (const char* entry : entries) {
    image += entry;
    image += '\0';
  }
  return image;
}

TEST(EnvironHoldsTest, MatchesWholeEntriesOnly) {
  const std::string entry = ProcessTagEntry("exp-000042", 1, 0xab);
  EXPECT_EQ(entry, "VRAMLAB_PROCESS_TAG=exp-000042/1/00000000000000ab");
  EXPECT_TRUE(EnvironHolds(Environ({"PATH=/bin", entry.c_str(), "HOME=/"}), entry));
  EXPECT_TRUE(EnvironHolds(Environ({entry.c_str()}), entry));
  // A longer value, a longer name, or the entry inside another value is not the tag.
  EXPECT_FALSE(EnvironHolds(Environ({(entry + "0").c_str()}), entry));
  EXPECT_FALSE(EnvironHolds(Environ({("X" + entry).c_str()}), entry));
  EXPECT_FALSE(EnvironHolds(Environ({("NOTE=" + entry).c_str()}), entry));
  // Another launch of the same experiment and rank (another nonce) is not this one.
  EXPECT_FALSE(EnvironHolds(Environ({ProcessTagEntry("exp-000042", 1, 0xac).c_str()}), entry));
  EXPECT_NE(NewProcessTagNonce(), NewProcessTagNonce());
  EXPECT_FALSE(EnvironHolds("", entry));
  EXPECT_FALSE(EnvironHolds(Environ({"A=1"}), ""));
}

// A child started with the tag in a session of its own is found by it (and by no other tag),
// and SignalTaggedProcesses ends it.
TEST(TaggedProcessesTest, FindsAndSignalsAProcessInASessionOfItsOwn) {
  const std::string entry = ProcessTagEntry("exp-tagged-test", 0, NewProcessTagNonce());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setsid();
    std::string tag = entry;
    char* argv[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("60"), nullptr};
    char* envp[] = {const_cast<char*>("PATH=/bin"), tag.data(), nullptr};
    execve("/bin/sleep", argv, envp);
    _exit(127);
  }
  // The environment is the exec'd one once /proc shows it.
  std::vector<pid_t> found;
  for (int i = 0; i < 200 && found.empty(); ++i) {
    found = FindTaggedProcesses(getuid(), entry);
    if (found.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(found, std::vector<pid_t>{child});
  EXPECT_TRUE(
      FindTaggedProcesses(getuid(), ProcessTagEntry("exp-tagged-test", 1, NewProcessTagNonce()))
          .empty());
  EXPECT_TRUE(FindTaggedProcesses(getuid() + 1, entry).empty()) << "another user's processes";
  EXPECT_EQ(SignalTaggedProcesses(getuid(), entry, SIGKILL), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(FindTaggedProcesses(getuid(), entry).empty());
}

}  // namespace
}  // namespace vramlab::server
