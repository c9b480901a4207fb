// Path helpers over POSIX calls. The worker does not use std::filesystem: the PyTorch wheels'
// libtorch.so exports its own copies of std::filesystem functions, the dynamic linker binds the
// worker's calls to them, and some of them crash (std::filesystem::remove_all jumps to address 0
// on LibTorch 2.11+cu130).
#ifndef VRAMLAB_WORKER_UTIL_FILE_PATHS_H_
#define VRAMLAB_WORKER_UTIL_FILE_PATHS_H_

#include <string>

namespace vramlab::worker {

// True when `path` names an existing file or directory.
bool PathExists(const std::string& path);

// `dir` + "/" + `name`, without doubling a trailing slash of `dir`.
std::string JoinPath(const std::string& dir, const std::string& name);

// Everything before the last '/', "." when there is none.
std::string DirName(const std::string& path);

// Deletes `path` and, for a directory, everything below it; false if anything could not be
// removed.
bool RemoveTree(const std::string& path);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_UTIL_FILE_PATHS_H_
