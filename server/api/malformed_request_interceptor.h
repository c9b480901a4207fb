// Answers a request whose bytes do not parse as the method's message with INVALID_ARGUMENT.
//
// gRPC's generated handlers report a request that fails to deserialize as INTERNAL, which reads as
// a fault of the daemon. This interceptor notes, at POST_RECV_MESSAGE, that no message came out of
// the bytes (the handler hands interceptors a null message then) and rewrites that call's status
// before it is sent. Calls whose request parsed are never touched, so the daemon's own INTERNAL
// answers stay as they are.
//
// A proto3 string field holding invalid UTF-8 also fails the parse; protobuf names the field only
// in a log line. InstallProtobufParseLogHandler routes protobuf's log through a handler that keeps
// that name for the interceptor of the same call (deserialization and the interceptor's
// POST_RECV_MESSAGE run on one thread) and drops the line, so that a hostile client cannot fill
// the daemon's log with them; other protobuf messages still go to stderr.
#ifndef VRAMLAB_SERVER_API_MALFORMED_REQUEST_INTERCEPTOR_H_
#define VRAMLAB_SERVER_API_MALFORMED_REQUEST_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <vector>

namespace vramlab::server {

// For grpc::ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory();

// Call once, before the server starts (protobuf's SetLogHandler is not thread-safe).
void InstallProtobufParseLogHandler();

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_API_MALFORMED_REQUEST_INTERCEPTOR_H_
