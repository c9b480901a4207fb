// What every subcommand runs with: its parsed flags, the output streams, whether stdout is a
// terminal, and the daemon connection (created on first use).
#ifndef VRAMLAB_CLIENT_COMMAND_ENV_H_
#define VRAMLAB_CLIENT_COMMAND_ENV_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "client/connection_options.h"
#include "client/daemon_client.h"
#include "client/flag_set.h"
#include "google/protobuf/message.h"

namespace vramlab::client {

class CommandEnv {
 public:
  CommandEnv(ParsedArgs args, ConnectionOptions connection, std::ostream& out, std::ostream& err,
             bool stdout_is_tty)
      : args_(std::move(args)),
        connection_(std::move(connection)),
        out_(out),
        err_(err),
        tty_(stdout_is_tty) {}

  const ParsedArgs& args() const { return args_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  bool json() const { return args_.GetBool("json"); }
  bool tty() const { return tty_; }

  absl::StatusOr<DaemonClient*> Client();

  // Prints `message` as protobuf canonical JSON (indented, default values included).
  void PrintJson(const google::protobuf::Message& message);

 private:
  ParsedArgs args_;
  ConnectionOptions connection_;
  std::ostream& out_;
  std::ostream& err_;
  bool tty_;
  std::unique_ptr<DaemonClient> client_;
};

// Canonical JSON of `message`; one line unless `pretty`. Default values are printed so scripts
// see every field.
std::string MessageToJson(const google::protobuf::Message& message, bool pretty);

// The one positional ID a command needs; INVALID_ARGUMENT naming the command otherwise.
absl::StatusOr<std::string> SingleId(const ParsedArgs& args, const char* command);

}  // namespace vramlab::client

#endif  // VRAMLAB_CLIENT_COMMAND_ENV_H_
