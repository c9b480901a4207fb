// vramlab: the command-line client of vramlabd. Dispatches on the subcommand; every failure ends
// as one line "vramlab: CODE: message" on stderr and a documented exit code (docs/CLI.md).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/command_line.h"
#include "client/commands.h"
#include "client/connection_options.h"
#include "client/exit_codes.h"
#include "client/stdout_check.h"
#include "grpc/support/log.h"

namespace {

using vramlab::client::kExitUsage;

int Fail(const absl::Status& status) {
  std::cerr << "vramlab: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << std::endl;
  return vramlab::client::ExitCodeForError(status);
}

// Runs the command line; its exit code.
int Run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << vramlab::client::HelpText(nullptr);
    return kExitUsage;
  }
  auto invocation = vramlab::client::ReadCommandLine(args);
  if (!invocation.ok()) return Fail(invocation.status());
  if (invocation->help || invocation->command == nullptr) {
    std::cout << vramlab::client::HelpText(invocation->command);
    return 0;
  }
  const vramlab::client::Command& command = *invocation->command;
  vramlab::client::ParsedArgs& parsed = invocation->args;
  vramlab::client::ConnectionOptions connection;
  if (!command.local) {
    auto resolved = vramlab::client::ResolveConnectionOptions(
        parsed, [](const char* name) -> const char* { return std::getenv(name); });
    if (!resolved.ok()) return Fail(resolved.status());
    if (!resolved->warning.empty()) std::cerr << resolved->warning << "\n";
    connection = *std::move(resolved);
  }
  vramlab::client::CommandEnv env(std::move(parsed), std::move(connection), std::cout, std::cerr,
                                  isatty(STDOUT_FILENO) == 1);
  auto exit_code = command.run(env);
  if (!exit_code.ok()) return Fail(exit_code.status());
  return *exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // gRPC's own logging would add lines (and stack-trace-like noise) to our one-line errors.
  if (std::getenv("VRAMLAB_GRPC_LOG") == nullptr) gpr_set_log_function([](gpr_log_func_args*) {});
  vramlab::client::CheckStdoutWrites();
  const int exit_code = Run(argc, argv);
  // Output that never reached stdout (a full disk, a closed pipe) fails a command that succeeded
  // otherwise; a command that failed has said why already and keeps its exit code.
  if (absl::Status flushed = vramlab::client::FlushStdout(); !flushed.ok() && exit_code == 0) {
    return Fail(flushed);
  }
  return exit_code;
}
