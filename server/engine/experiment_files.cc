#include "server/engine/experiment_files.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace vramlab::server {

namespace fs = std::filesystem;

absl::Status ExperimentFiles::CreateDir() const {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error) return absl::InternalError(absl::StrCat("mkdir ", dir_, ": ", error.message()));
  return absl::OkStatus();
}

absl::Status ExperimentFiles::WriteSpec(const std::string& json) const {
  std::string tmp = spec_path() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << json;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code error;
  fs::rename(tmp, spec_path(), error);
  if (error) return absl::InternalError(absl::StrCat("rename ", tmp, ": ", error.message()));
  return absl::OkStatus();
}

bool ExperimentFiles::HasSnapshot() const {
  std::error_code error;
  return fs::is_regular_file(snapshot_path(), error) && fs::file_size(snapshot_path(), error) > 0;
}

}  // namespace vramlab::server
