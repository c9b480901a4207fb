#include "server/supervise/tagged_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vramlab::server {
namespace {

// An environment larger than this is read only this far (the tag is set with the first entries
// a program inherits, but a program may add to its environment before it starts others).
constexpr size_t kMaxEnvironBytes = 1 << 20;

bool ReadEnviron(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buffer[16384];
  while (out->size() < kMaxEnvironBytes) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return true;
}

}  // namespace

std::string ProcessTagEntry(const std::string& experiment_id, int rank, uint64_t nonce) {
  return absl::StrCat(kProcessTagName, "=", experiment_id, "/", rank, "/",
                      absl::Hex(nonce, absl::kZeroPad16));
}

uint64_t NewProcessTagNonce() {
  std::random_device source;
  return (static_cast<uint64_t>(source()) << 32) ^ source();
}

bool EnvironHolds(const std::string& environ, const std::string& entry) {
  if (entry.empty()) return false;
  size_t at = 0;
  while ((at = environ.find(entry, at)) != std::string::npos) {
    const bool starts = at == 0 || environ[at - 1] == '\0';
    const size_t end = at + entry.size();
    const bool ends = end == environ.size() || environ[end] == '\0';
    if (starts && ends) return true;
    at = end;
  }
  return false;
}

std::vector<pid_t> FindTaggedProcesses(uid_t uid, const std::string& entry,
                                       const std::string& proc_root) {
  std::vector<pid_t> found;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return found;
  const pid_t self = getpid();
  std::string environ;
  while (struct dirent* item = readdir(dir)) {
    int pid = 0;
    if (!absl::SimpleAtoi(item->d_name, &pid) || pid <= 1 || pid == self) continue;
    const std::string base = absl::StrCat(proc_root, "/", item->d_name);
    struct stat owner;
    if (stat(base.c_str(), &owner) != 0 || owner.st_uid != uid) continue;
    if (ReadEnviron(base + "/environ", &environ) && EnvironHolds(environ, entry)) {
      found.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(dir);
  return found;
}

int SignalTaggedProcesses(uid_t uid, const std::string& entry, int signal) {
  int signalled = 0;
  for (pid_t pid : FindTaggedProcesses(uid, entry)) {
    if (kill(pid, signal) == 0) ++signalled;
  }
  return signalled;
}

}  // namespace vramlab::server
