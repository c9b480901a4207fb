// Path arithmetic the daemon's check of spec host paths and the worker's check of each file it
// opens share, so that both answer "is this inside an allowed directory" the same way.
#ifndef VRAMLAB_COMMON_PATHS_PATH_CONTAINMENT_H_
#define VRAMLAB_COMMON_PATHS_PATH_CONTAINMENT_H_

#include <string>

namespace vramlab::paths {

// realpath(3) of `path` (every symbolic link and `..` resolved); empty when it fails, with errno
// set.
std::string RealPath(const std::string& path);

// True when `path` is `dir` or lies below it. Both must be absolute and normal (no `.`, `..` or
// repeated slashes); "/a/bc" is not under "/a/b".
bool IsUnder(const std::string& path, const std::string& dir);

// `path` (absolute) with "." and ".." components and repeated slashes removed, without touching
// the filesystem: "/a/b/../c/" -> "/a/c". ".." at the root stays at the root.
std::string LexicallyNormal(const std::string& path);

}  // namespace vramlab::paths

#endif  // VRAMLAB_COMMON_PATHS_PATH_CONTAINMENT_H_
