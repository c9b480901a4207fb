// Who is calling: the bearer token of the `authorization` metadata looked up in the token table.
// Without a token table every caller is "local", an admin (a loopback-only daemon). Reading is
// open to every authenticated caller; owners cancel their own experiments, admins any.
// Immutable after construction, so thread-safe.
#ifndef VRAMLAB_SERVER_AUTH_AUTHENTICATOR_H_
#define VRAMLAB_SERVER_AUTH_AUTHENTICATOR_H_

#include <map>
#include <optional>
#include <string>

#include <grpcpp/support/string_ref.h>

#include "absl/status/statusor.h"
#include "server/auth/token_file.h"

namespace vramlab::server {

inline constexpr char kLocalUser[] = "local";

class Authenticator {
 public:
  // No authentication.
  Authenticator() = default;
  explicit Authenticator(TokenTable tokens) : tokens_(std::move(tokens)) {}

  bool enabled() const { return tokens_.has_value(); }
  // UNAUTHENTICATED for a missing, malformed or unknown token.
  absl::StatusOr<Principal> Authenticate(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;

 private:
  std::optional<TokenTable> tokens_;
};

// PERMISSION_DENIED unless `caller` owns the experiment or is an admin.
absl::Status CheckMayModify(const Principal& caller, const std::string& owner);

// True for 127.0.0.0/8, ::1 and "localhost" (address as "host:port").
bool IsLoopbackListenAddress(const std::string& address);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_AUTH_AUTHENTICATOR_H_
