// Host paths in a spec are a privilege: a spec may name a file or directory on the daemon's host
// (model.weights_dir, training.data.token_ids_file) only under a directory the operator allows
// (vramlabd --allowed-dir, repeatable; none by default). Without this a plain user could make the
// worker read any file the daemon can read — its tokens file, /etc/shadow, /proc/self/environ.
//
// The check is made twice: here at submit, on the path with `..` and symbolic links resolved, and
// again by the worker on each file it actually opened (worker/util/host_files.h), so that a
// symbolic link swapped after submit cannot redirect a read.
#ifndef VRAMLAB_SERVER_SPEC_HOST_PATHS_H_
#define VRAMLAB_SERVER_SPEC_HOST_PATHS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

class HostPathPolicy {
 public:
  // No host path is allowed.
  HostPathPolicy() = default;

  // Each of `dirs` must be an existing directory; it is kept with symbolic links and `..`
  // resolved. INVALID_ARGUMENT naming the directory otherwise. `never` are the daemon's own
  // secrets and state (its data directory, tokens file, TLS key): refused even inside an allowed
  // directory; those that do not exist are ignored.
  static absl::StatusOr<HostPathPolicy> Create(const std::vector<std::string>& dirs,
                                               const std::vector<std::string>& never = {});

  // The allowed directories, resolved.
  const std::vector<std::string>& dirs() const { return dirs_; }
  // The refused paths, as given and resolved.
  const std::vector<std::string>& never() const { return never_; }

  // `path` (the value of spec field `field`, absolute) resolved to the file or directory it names.
  // INVALID_ARGUMENT "spec.FIELD: ..." when it lies outside every allowed directory, lexically or
  // once links are followed, or does not exist there. The message never carries file content;
  // whether a path outside the allowed directories exists is not revealed.
  // `kind`: what the resolved path must be (a FIFO or device would block or flood the worker that
  // reads it).
  enum class Kind { kAny, kRegularFile, kDirectory };
  absl::StatusOr<std::string> Resolve(absl::string_view field, const std::string& path,
                                      Kind kind = Kind::kAny) const;

  // Resolve() applied to every host path of `spec`, written back resolved.
  absl::Status ResolveSpec(vramlab::v1::ExperimentSpec* spec) const;

 private:
  struct FileId {
    dev_t dev;
    ino_t ino;
  };
  HostPathPolicy(std::vector<std::string> dirs, std::vector<std::string> never,
                 std::vector<FileId> never_files)
      : dirs_(std::move(dirs)), never_(std::move(never)), never_files_(std::move(never_files)) {}
  // True when `canonical_path` lies under an allowed directory and under none of `never_`.
  bool Contains(const std::string& canonical_path) const;

  std::vector<std::string> dirs_;
  std::vector<std::string> never_;
  // The files of `never_`: a hard link to one, anywhere, is refused too.
  std::vector<FileId> never_files_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_SPEC_HOST_PATHS_H_
