#include "server/spec/command_spec.h"

#include <pwd.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/protobuf/blank_message.h"
#include "common/spec/spec_ranges.h"
#include "server/spec/display_text.h"
#include "server/spec/validate_spec.h"

namespace vramlab::server {
namespace {

using vramlab::v1::ExperimentSpec;

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("spec.command.", field, ": ", message));
}

// Names the daemon sets for the program; a spec may not override them.
bool IsDaemonSetName(absl::string_view name) {
  return absl::StartsWith(name, "VRAMLAB_") || name == "CUDA_VISIBLE_DEVICES" ||
         name == "PYTORCH_CUDA_ALLOC_CONF" || name == "PYTORCH_ALLOC_CONF";
}

// Names the daemon sets for each rank of a command of two or more processes, as torchrun does.
bool IsRankName(absl::string_view name) {
  for (absl::string_view set : kCommandRankEnvNames) {
    if (name == set) return true;
  }
  return false;
}

bool IsEnvName(absl::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

// CAP_SETUID (7) and CAP_SETGID (6) in the effective set, from /proc/self/status.
bool CanSwitchUser() {
  if (geteuid() == 0) return true;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, "CapEff:")) continue;
    uint64_t caps = 0;
    std::string hex(absl::StripAsciiWhitespace(line.substr(7)));
    if (!absl::SimpleHexAtoi(hex, &caps)) return false;
    return (caps & (1ull << 7)) != 0 && (caps & (1ull << 6)) != 0;
  }
  return false;
}

}  // namespace

bool IsCommand(const ExperimentSpec& spec) { return spec.has_command(); }

absl::Status ValidateCommandShape(const ExperimentSpec& spec) {
  if (!spec.has_command()) return absl::OkStatus();
  const vramlab::v1::CommandSpec& command = spec.command();
  if (command.argv().empty()) return Invalid("argv", "required: the program and its arguments");
  if (command.argv_size() > kMaxCommandArgs) {
    return Invalid(
        "argv", absl::StrCat("at most ", kMaxCommandArgs, " entries, got ", command.argv_size()));
  }
  for (int i = 0; i < command.argv_size(); ++i) {
    const std::string& arg = command.argv(i);
    if (arg.size() > kMaxCommandArgBytes) {
      return Invalid(absl::StrCat("argv[", i, "]"),
                     absl::StrCat("at most ", kMaxCommandArgBytes, " bytes, got ", arg.size()));
    }
    if (arg.find('\0') != std::string::npos) {
      return Invalid(absl::StrCat("argv[", i, "]"), "contains a NUL byte");
    }
  }
  if (command.argv(0).empty() || command.argv(0)[0] != '/') {
    return Invalid("argv[0]", "must be an absolute path (no shell and no PATH lookup)");
  }
  if (command.working_dir().empty()) return Invalid("working_dir", "required");
  if (command.working_dir()[0] != '/' || command.working_dir().size() > kMaxCommandArgBytes ||
      command.working_dir().find('\0') != std::string::npos) {
    return Invalid("working_dir", "must be an absolute path");
  }
  if (command.env_size() > kMaxCommandEnv) {
    return Invalid("env",
                   absl::StrCat("at most ", kMaxCommandEnv, " entries, got ", command.env_size()));
  }
  for (int i = 0; i < command.env_size(); ++i) {
    const std::string& entry = command.env(i);
    const std::string field = absl::StrCat("env[", i, "]");
    size_t eq = entry.find('=');
    if (eq == std::string::npos || !IsEnvName(absl::string_view(entry).substr(0, eq))) {
      return Invalid(field, "must be KEY=value with KEY of letters, digits and _");
    }
    if (entry.size() > kMaxCommandArgBytes || entry.find('\0') != std::string::npos) {
      return Invalid(field, absl::StrCat("at most ", kMaxCommandArgBytes, " bytes, no NUL"));
    }
    if (IsDaemonSetName(entry.substr(0, eq))) {
      return Invalid(field,
                     absl::StrCat(entry.substr(0, eq), " is set by the daemon for every command"));
    }
    if (spec.parallel().world_size() >= 2 && IsRankName(entry.substr(0, eq))) {
      return Invalid(field, absl::StrCat(entry.substr(0, eq),
                                         " is set by the daemon for each rank of a command of "
                                         "parallel.world_size >= 2"));
    }
  }
  if (!command.has_equivalent_spec() && (!IsBlank(spec.model()) || !IsBlank(spec.training()))) {
    return Invalid("has_equivalent_spec",
                   "spec.model and spec.training describe a command only as its equivalent spec: "
                   "set has_equivalent_spec or leave them unset");
  }
  if (spec.has_sweep()) return absl::InvalidArgumentError("spec.sweep: not allowed with a command");
  if (spec.fault() != vramlab::v1::FAULT_UNSPECIFIED) {
    return absl::InvalidArgumentError("spec.fault: not allowed with a command");
  }
  // parallel.world_size is how many processes the command runs as; the rest of ParallelSpec says
  // how an equivalent spec shards, so it needs one.
  if (!command.has_equivalent_spec()) {
    vramlab::v1::ParallelSpec rest = spec.parallel();
    rest.clear_world_size();
    if (!IsBlank(rest)) {
      return Invalid("has_equivalent_spec",
                     "spec.parallel describes a command's sharding only as its equivalent spec: "
                     "set has_equivalent_spec or give parallel.world_size alone");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCommandSpec(const ExperimentSpec& spec, const SpecLimits& limits) {
  if (absl::Status shape = ValidateCommandShape(spec); !shape.ok()) return shape;
  ExperimentSpec rest = spec;
  rest.clear_command();
  // Without an equivalent spec there is no model (ValidateCommandShape checked it is unset); the
  // rules that need one get the smallest preset, which passes them and is never run.
  if (!spec.command().has_equivalent_spec()) rest.mutable_model()->set_preset("tiny");
  return ValidateSpec(rest, limits);
}

absl::StatusOr<CommandPolicy> CommandPolicy::Create(const std::string& user,
                                                    const std::string& probe_dir) {
  if (user.empty()) {
    return absl::FailedPreconditionError(
        "--allow-commands needs --command-user: the unprivileged user commands run as");
  }
  struct passwd entry;
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("--command-user ", user, ": no such user"));
  }
  if (entry.pw_uid == 0 || entry.pw_gid == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--command-user ", user, ": commands never run as root (uid 0 or group 0)"));
  }
  if (entry.pw_uid == geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--command-user ", user,
        ": is the daemon's own user, which can read its tokens, data directory and TLS key; "
        "name a user of its own"));
  }
  if (!CanSwitchUser()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--command-user ", user,
        ": the daemon cannot switch to it (run vramlabd as root or with CAP_SETUID and "
        "CAP_SETGID)"));
  }
  if (access((probe_dir + "/sitecustomize.py").c_str(), R_OK) != 0 ||
      access((probe_dir + "/vramlab_probe/__init__.py").c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--probe-dir ", probe_dir, ": has no sitecustomize.py and vramlab_probe/ package"));
  }
  CommandPolicy policy;
  policy.allowed_ = true;
  policy.user_ = user;
  policy.uid_ = entry.pw_uid;
  policy.gid_ = entry.pw_gid;
  policy.home_ = entry.pw_dir == nullptr ? "/" : entry.pw_dir;
  policy.probe_dir_ = probe_dir;
  return policy;
}

absl::Status CommandPolicy::CheckAndResolve(const Principal& caller, bool auth_enabled,
                                            const HostPathPolicy& paths,
                                            ExperimentSpec* spec) const {
  if (!spec->has_command()) return absl::OkStatus();
  if (!allowed_) {
    return absl::PermissionDeniedError(
        "spec.command: commands are disabled on this daemon (vramlabd --allow-commands)");
  }
  if (auth_enabled && !caller.may_run_commands) {
    return absl::PermissionDeniedError(absl::StrCat(
        "spec.command: user ", caller.user,
        " may not run commands (the tokens file gives a token the role user,commands or "
        "admin,commands)"));
  }
  vramlab::v1::CommandSpec* command = spec->mutable_command();
  auto program = ResolveProgram(paths, spec->command());
  if (!program.ok()) return program.status();
  auto dir = paths.Resolve("command.working_dir", command->working_dir(),
                           HostPathPolicy::Kind::kDirectory);
  if (!dir.ok()) return dir.status();
  command->set_working_dir(*dir);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveProgram(const HostPathPolicy& paths,
                                           const vramlab::v1::CommandSpec& command) {
  auto program =
      paths.Resolve("command.argv[0]", command.argv(0), HostPathPolicy::Kind::kRegularFile);
  if (!program.ok()) return program.status();
  if (access(program->c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError("spec.command.argv[0]: not an executable file");
  }
  return program;
}

std::vector<std::string> CommandPolicy::Environment(const ExperimentSpec& spec,
                                                    const std::vector<std::string>& daemon_env,
                                                    bool snapshot_fd_open) const {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"HOME", home_},
      {"USER", user_},
      {"LOGNAME", user_},
      {"LANG", "C.UTF-8"},
  };
  std::string user_pythonpath;
  for (const std::string& entry : spec.command().env()) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    if (entry.compare(0, eq, "PYTHONPATH") == 0) {
      user_pythonpath = entry.substr(eq + 1);
    } else {
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  for (const std::string& entry : daemon_env) {
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  env["PYTHONPATH"] = probe_dir_ + (user_pythonpath.empty() ? "" : ":" + user_pythonpath);
  const vramlab::v1::MemorySpec& memory = spec.memory();
  env["VRAMLAB_PROBE"] = "1";
  env["VRAMLAB_PROBE_DIR"] = probe_dir_;
  env["VRAMLAB_PROBE_EVENTS_FD"] = "3";
  env["VRAMLAB_PROBE_DEVICE"] = spec.device() == vramlab::v1::CUDA ? "cuda" : "cpu";
  env["VRAMLAB_PROBE_SAMPLE_INTERVAL_MS"] =
      absl::StrCat(memory.sample_interval_ms() > 0 ? memory.sample_interval_ms()
                                                   : spec_rules::kDefaultSampleIntervalMs);
  env["VRAMLAB_PROBE_MEMORY_LIMIT_BYTES"] = absl::StrCat(memory.device_memory_limit_bytes());
  if (memory.record_history() && snapshot_fd_open) {
    env["VRAMLAB_PROBE_SNAPSHOT_FD"] = absl::StrCat(kCommandSnapshotFd);
  }
  std::vector<std::string> result;
  for (const auto& [key, value] : env) result.push_back(key + "=" + value);
  return result;
}

}  // namespace vramlab::server
