// Reading a file that holds secrets (the tokens file, the TLS private key): refused when its
// mode lets group or others read, write or execute it, so a leak by mode is caught at start.
#ifndef VRAMLAB_SERVER_AUTH_SECRET_FILE_H_
#define VRAMLAB_SERVER_AUTH_SECRET_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vramlab::server {

// The content of `path`. `what` names the file in errors ("auth tokens file"). NOT_FOUND when it
// cannot be opened, PERMISSION_DENIED when group or others have any access to it. The mode is
// checked on the opened file, so a rename in between cannot swap in another one. Errors never
// carry the content.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view what);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_AUTH_SECRET_FILE_H_
