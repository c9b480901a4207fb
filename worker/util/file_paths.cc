#include "worker/util/file_paths.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cstdio>

namespace vramlab::worker {

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool RemoveTree(const std::string& path) {
  // Depth first (FTW_DEPTH), not following symbolic links (FTW_PHYS).
  auto remove_one = [](const char* item, const struct stat*, int, struct FTW*) {
    return std::remove(item) == 0 ? 0 : -1;
  };
  return ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

}  // namespace vramlab::worker
