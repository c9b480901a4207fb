#include "server/auth/proven_address_interceptor.h"

#include <grpcpp/server_context.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace vramlab::server {
namespace {

class ProvenAddressInterceptor final : public grpc::experimental::Interceptor {
 public:
  ProvenAddressInterceptor(grpc::experimental::ServerRpcInfo* info, AuthThrottle* throttle)
      : info_(info), throttle_(throttle) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().ok()) {
      throttle_->RecordSuccess(AuthThrottle::PeerAddress(info_->server_context()->peer()),
                               absl::Now());
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* const info_;
  AuthThrottle* const throttle_;
};

}  // namespace

grpc::experimental::Interceptor* ProvenAddressInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->method() == nullptr || !absl::StartsWith(info->method(), method_prefix_)) {
    return nullptr;
  }
  return new ProvenAddressInterceptor(info, throttle_);
}

}  // namespace vramlab::server
