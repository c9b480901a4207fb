#include "server/auth/authenticator.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace vramlab::server {

absl::StatusOr<Principal> Authenticator::Authenticate(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (!tokens_.has_value()) return Principal{kLocalUser, true, true};
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError("missing authorization metadata (Bearer token)");
  }
  absl::string_view value(it->second.data(), it->second.size());
  if (!absl::ConsumePrefix(&value, "Bearer ") && !absl::ConsumePrefix(&value, "bearer ")) {
    return absl::UnauthenticatedError("authorization metadata must be \"Bearer <token>\"");
  }
  auto found = tokens_->find(value);
  if (found == tokens_->end()) return absl::UnauthenticatedError("unknown token");
  return found->second;
}

absl::Status CheckMayModify(const Principal& caller, const std::string& owner) {
  if (caller.admin || caller.user == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("user ", caller.user, " may not modify an experiment of ", owner));
}

bool IsLoopbackListenAddress(const std::string& address) {
  absl::string_view host(address);
  size_t colon = host.rfind(':');
  if (colon != absl::string_view::npos) host = host.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace vramlab::server
