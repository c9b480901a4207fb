// vramlab cancel / update / hold / release / delete: the verbs that manage queued and finished
// experiments. Each takes one or more ids and makes one request per id: a line per id that
// worked, a line on stderr naming each that did not, and the exit code of the first failure (0
// when every one worked). With a single id a failure is reported as any command's error.
#include <functional>

#include "absl/strings/str_cat.h"
#include "client/byte_size.h"
#include "client/commands.h"
#include "client/describe.h"
#include "client/exit_codes.h"
#include "client/flag_values.h"
#include "common/status_macros.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;

// Runs `verb` on every id of the command line. `report` prints what one success says.
template <typename Result>
absl::StatusOr<int> ForEachId(
    CommandEnv& env, const char* command,
    const std::function<absl::StatusOr<Result>(DaemonClient&, const std::string&)>& verb,
    const std::function<void(const Result&)>& report) {
  const std::vector<std::string>& ids = env.args().positionals();
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vramlab ", command, " needs at least one experiment ID"));
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  int exit_code = kExitOk;
  int failures = 0;
  for (const std::string& id : ids) {
    absl::StatusOr<Result> result = verb(*client, id);
    if (!result.ok()) {
      // One id: the error as every command prints it. An unreachable daemon: the same for every
      // id, said once.
      if (ids.size() == 1 || (absl::IsUnavailable(result.status()) && &id == &ids.front())) {
        return result.status();
      }
      ++failures;
      env.err() << "vramlab: " << id << ": " << absl::StatusCodeToString(result.status().code())
                << ": " << result.status().message() << "\n";
      if (exit_code == kExitOk) exit_code = ExitCodeForError(result.status());
      continue;
    }
    if (env.json() && ids.size() == 1) {
      env.PrintJson(*result);
    } else if (env.json()) {
      env.out() << MessageToJson(*result, /*pretty=*/false);  // one per line
    } else {
      report(*result);
    }
  }
  if (failures > 0 && ids.size() > 1) {
    env.err() << "vramlab: " << command << ": " << failures << " of " << ids.size() << " failed\n";
  }
  return exit_code;
}

}  // namespace

absl::StatusOr<int> RunCancel(CommandEnv& env) {
  return ForEachId<Experiment>(
      env, "cancel", [](DaemonClient& client, const std::string& id) { return client.Cancel(id); },
      [&env](const Experiment& experiment) {
        env.out() << experiment.id() << " " << StateName(experiment.state());
        if (!IsFinalState(experiment.state())) env.out() << " (cancellation requested)";
        env.out() << "\n";
      });
}

absl::StatusOr<int> RunHold(CommandEnv& env) {
  return ForEachId<Experiment>(
      env, "hold", [](DaemonClient& client, const std::string& id) { return client.Hold(id); },
      [&env](const Experiment& experiment) {
        env.out() << experiment.id() << " held (position " << experiment.queue_position()
                  << "; 'vramlab release " << experiment.id() << "' lets it start)\n";
      });
}

absl::StatusOr<int> RunRelease(CommandEnv& env) {
  return ForEachId<Experiment>(
      env, "release",
      [](DaemonClient& client, const std::string& id) { return client.Release(id); },
      [&env](const Experiment& experiment) {
        env.out() << experiment.id() << " " << StateName(experiment.state());
        if (experiment.state() == Experiment::QUEUED) {
          env.out() << " (position " << experiment.queue_position() << ")";
        }
        env.out() << "\n";
      });
}

absl::StatusOr<int> RunDelete(CommandEnv& env) {
  return ForEachId<vramlab::v1::DeleteExperimentResponse>(
      env, "delete", [](DaemonClient& client, const std::string& id) { return client.Delete(id); },
      [&env](const vramlab::v1::DeleteExperimentResponse& deleted) {
        env.out() << deleted.id() << " deleted (" << FormatBytes(deleted.file_bytes())
                  << " of files)\n";
      });
}

void DeclareUpdateFlags(FlagSet& flags) {
  flags.Value("priority", "P", "low|normal|high (to the back of the owner's line at it)")
      .Value("time-limit", "DURATION", "new wall-clock limit, e.g. 30m")
      .Value("name", "NAME", "new label");
}

absl::StatusOr<int> RunUpdate(CommandEnv& env) {
  const ParsedArgs& args = env.args();
  vramlab::v1::UpdateExperimentRequest request;
  if (auto v = args.Get("priority")) {
    ASSIGN_OR_RETURN(int choice, ParseChoiceFlag("priority", *v, {"low", "normal", "high"}));
    request.set_priority(static_cast<vramlab::v1::Priority>(choice + 1));
  }
  if (auto v = args.Get("time-limit")) {
    ASSIGN_OR_RETURN(absl::Duration limit, ParseDurationFlag("time-limit", *v));
    const int64_t seconds = absl::ToInt64Seconds(limit);
    if (seconds < 1) return absl::InvalidArgumentError("--time-limit: at least 1s");
    if (seconds > INT32_MAX) return absl::InvalidArgumentError("--time-limit: too long");
    request.set_time_limit_seconds(static_cast<int32_t>(seconds));
  }
  if (auto v = args.Get("name")) {
    if (v->empty()) return absl::InvalidArgumentError("--name: must not be empty");
    request.set_name(*v);
  }
  if (request.priority() == vramlab::v1::PRIORITY_UNSPECIFIED &&
      request.time_limit_seconds() == 0 && request.name().empty()) {
    return absl::InvalidArgumentError(
        "vramlab update needs at least one of --priority, --time-limit, --name");
  }
  return ForEachId<Experiment>(
      env, "update",
      [&request](DaemonClient& client, const std::string& id) {
        vramlab::v1::UpdateExperimentRequest one = request;
        one.set_id(id);
        return client.Update(one);
      },
      [&env](const Experiment& experiment) {
        env.out() << experiment.id() << " " << StateName(experiment.state());
        if (experiment.state() == Experiment::QUEUED) {
          env.out() << " (position " << experiment.queue_position() << ")";
        }
        const vramlab::v1::ExperimentSpec& spec = experiment.spec();
        const char* priority = spec.priority() == vramlab::v1::PRIORITY_HIGH  ? "high"
                               : spec.priority() == vramlab::v1::PRIORITY_LOW ? "low"
                                                                              : "normal";
        env.out() << ": priority " << priority << ", time limit "
                  << FormatSeconds(spec.time_limit_seconds());
        if (!spec.name().empty()) env.out() << ", name " << spec.name();
        env.out() << "\n";
      });
}

}  // namespace vramlab::client
