#include "server/spec/host_paths.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/paths/path_containment.h"

namespace vramlab::server {
namespace {

using paths::IsUnder;
using paths::RealPath;

absl::Status Denied(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", field, ": ", why));
}

}  // namespace

absl::StatusOr<HostPathPolicy> HostPathPolicy::Create(const std::vector<std::string>& dirs,
                                                      const std::vector<std::string>& never) {
  std::vector<std::string> resolved;
  for (const std::string& dir : dirs) {
    if (dir.empty() || dir[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("--allowed-dir ", dir, ": must be an absolute path"));
    }
    std::string real = RealPath(dir);
    struct stat st;
    if (real.empty() || ::stat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allowed-dir ", dir, ": not an existing directory"));
    }
    resolved.push_back(real);
  }
  std::vector<std::string> resolved_never;
  std::vector<FileId> never_files;
  for (const std::string& path : never) {
    if (path.empty()) continue;
    resolved_never.push_back(paths::LexicallyNormal(path));
    std::string real = RealPath(path);
    if (!real.empty()) resolved_never.push_back(real);
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      never_files.push_back({st.st_dev, st.st_ino});
    }
  }
  return HostPathPolicy(std::move(resolved), std::move(resolved_never), std::move(never_files));
}

bool HostPathPolicy::Contains(const std::string& canonical_path) const {
  for (const std::string& secret : never_) {
    if (IsUnder(canonical_path, secret)) return false;
  }
  for (const std::string& dir : dirs_) {
    if (IsUnder(canonical_path, dir)) return true;
  }
  return false;
}

absl::StatusOr<std::string> HostPathPolicy::Resolve(absl::string_view field,
                                                    const std::string& path, Kind kind) const {
  if (dirs_.empty()) {
    return Denied(field,
                  "this daemon allows no host paths (its operator can allow directories "
                  "with vramlabd --allowed-dir)");
  }
  const std::string allowed =
      absl::StrCat("allowed: ", absl::StrJoin(dirs_, ", "), " (vramlabd --allowed-dir)");
  // Lexically first: a path outside is refused without looking at the filesystem, so a refusal
  // says nothing about what exists there.
  if (path.empty() || path[0] != '/' || !Contains(paths::LexicallyNormal(path))) {
    return Denied(field, absl::StrCat("not under a directory this daemon allows; ", allowed));
  }
  std::string real = RealPath(path);
  if (real.empty()) {
    return Denied(field,
                  errno == ENOENT || errno == ENOTDIR ? "does not exist" : "cannot be resolved");
  }
  if (!Contains(real)) {
    return Denied(field, absl::StrCat("leads through a symbolic link outside the directories "
                                      "this daemon allows; ",
                                      allowed));
  }
  struct stat st;
  if (::stat(real.c_str(), &st) != 0) return Denied(field, "cannot be resolved");
  for (const FileId& secret : never_files_) {
    if (st.st_dev == secret.dev && st.st_ino == secret.ino) {
      return Denied(field, "is one of the daemon's own files");
    }
  }
  if (kind == Kind::kRegularFile && !S_ISREG(st.st_mode)) {
    return Denied(field, "not a regular file on the daemon's host");
  }
  if (kind == Kind::kDirectory && !S_ISDIR(st.st_mode)) {
    return Denied(field, "not a directory on the daemon's host");
  }
  return real;
}

absl::Status HostPathPolicy::ResolveSpec(vramlab::v1::ExperimentSpec* spec) const {
  if (!spec->model().weights_dir().empty()) {
    auto dir = Resolve("model.weights_dir", spec->model().weights_dir(), Kind::kDirectory);
    if (!dir.ok()) return dir.status();
    spec->mutable_model()->set_weights_dir(*dir);
  }
  if (!spec->training().data().token_ids_file().empty()) {
    auto file = Resolve("training.data.token_ids_file", spec->training().data().token_ids_file(),
                        Kind::kRegularFile);
    if (!file.ok()) return file.status();
    spec->mutable_training()->mutable_data()->set_token_ids_file(*file);
  }
  return absl::OkStatus();
}

}  // namespace vramlab::server
