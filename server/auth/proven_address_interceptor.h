// Tells an AuthThrottle which addresses authenticated: a gRPC server interceptor that, for every
// call of one service whose every method authenticates its caller before doing anything, records
// the peer's address as proven (AuthThrottle::RecordSuccess) when the call ends with status OK.
// OK is the one status such a call cannot end with unless its caller authenticated and was
// admitted by AuthThrottle::Check; calls of other services (health, reflection) are ignored.
#ifndef VRAMLAB_SERVER_AUTH_PROVEN_ADDRESS_INTERCEPTOR_H_
#define VRAMLAB_SERVER_AUTH_PROVEN_ADDRESS_INTERCEPTOR_H_

#include <string>

#include <grpcpp/support/server_interceptor.h>

#include "server/auth/auth_throttle.h"

namespace vramlab::server {

class ProvenAddressInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `service_full_name` is e.g. "vramlab.v1.VramlabService". `throttle` must outlive the server.
  ProvenAddressInterceptorFactory(const std::string& service_full_name, AuthThrottle* throttle)
      : method_prefix_("/" + service_full_name + "/"), throttle_(throttle) {}

  // An interceptor for a call of the service, nullptr for any other.
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const std::string method_prefix_;
  AuthThrottle* const throttle_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_AUTH_PROVEN_ADDRESS_INTERCEPTOR_H_
