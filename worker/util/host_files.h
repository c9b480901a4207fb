// Every file the worker reads because a spec named it (model.weights_dir's files,
// training.data.token_ids_file) is opened here. Under a daemon the worker is confined: the file
// actually opened — symbolic links followed, as the kernel resolved them for this very open — must
// lie under a directory the daemon allows and be none of the daemon's own files. The check is made
// on the open descriptor (/proc/self/fd), so a link swapped after the daemon's own check at submit
// cannot redirect the read. Run standalone (`vramlab-worker --spec`), the worker reads as its user.
//
// Errors never carry a file's text: they name the path and what is wrong with it. The readers
// built on this quote only numbers and, for a checkpoint, the tensor and shard names of its
// header and index (a confined worker reads only config.json, model.safetensors* and
// model.safetensors.index.json of a weights directory, and those names are the model's
// parameter names).
#ifndef VRAMLAB_WORKER_UTIL_HOST_FILES_H_
#define VRAMLAB_WORKER_UTIL_HOST_FILES_H_

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace vramlab::worker {

// Thrown for a file that cannot be opened or read, or that the confinement refuses.
class HostFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HostFileConfinement {
  bool confined = false;
  // Directories whose files may be read (resolved when set).
  std::vector<std::string> allowed_dirs;
  // Paths never read, even inside an allowed directory; a hard link to one of these files is
  // refused as well.
  std::vector<std::string> denied_paths;
};

// Sets the process's confinement. Called once by main before any thread starts; throws
// std::invalid_argument naming an allowed directory that does not resolve.
void ConfineHostFiles(const HostFileConfinement& confinement);

// Opens `path` read-only (close-on-exec) and returns the descriptor, which the caller closes.
// Throws HostFileError "PATH: ..." when it cannot be opened or the confinement refuses it.
int OpenHostFile(const std::string& path);

// The whole content of the regular file `path`, opened with OpenHostFile. Throws HostFileError
// when it is not a regular file or holds more than `max_bytes`.
std::string ReadHostFile(const std::string& path, size_t max_bytes);

}  // namespace vramlab::worker

#endif  // VRAMLAB_WORKER_UTIL_HOST_FILES_H_
