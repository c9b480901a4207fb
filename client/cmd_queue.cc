// vramlab cancel / update / hold / release / delete: the verbs that manage queued and finished
// experiments. Each takes one or more ids (cancel: or a filter that lists them) and makes one
// request per id: a line per id that worked, a line on stderr naming each that did not, and the
// exit code of the first failure (0 when every one worked). With a single id a failure is
// reported as any command's error.
#include <functional>

#include "absl/strings/str_cat.h"
#include "client/byte_size.h"
#include "client/commands.h"
#include "client/describe.h"
#include "client/exit_codes.h"
#include "client/flag_values.h"
#include "client/list_filter.h"
#include "common/status_macros.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;

// Runs `verb` on every id in `ids`. `report` prints what one success says.
template <typename Result>
absl::StatusOr<int> ForEachIdOf(
    CommandEnv& env, const char* command, const std::vector<std::string>& ids,
    const std::function<absl::StatusOr<Result>(DaemonClient&, const std::string&)>& verb,
    const std::function<void(const Result&)>& report) {
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

// Runs `verb` on every id of the command line.
template <typename Result>
absl::StatusOr<int> ForEachId(
    CommandEnv& env, const char* command,
    const std::function<absl::StatusOr<Result>(DaemonClient&, const std::string&)>& verb,
    const std::function<void(const Result&)>& report) {
  return ForEachIdOf<Result>(env, command, env.args().positionals(), verb, report);
}

// The ids `cancel --mine/--owner/--state` names: every matching queued or running experiment,
// the queued ones first (cancelling a running one frees its slot, and the next queued one would
// start before its own cancellation arrived), oldest first within each.
absl::StatusOr<std::vector<std::string>> CancelFilterIds(CommandEnv& env) {
  const ParsedArgs& args = env.args();
  if (!args.positionals().empty()) {
    return absl::InvalidArgumentError(
        "vramlab cancel takes experiment IDs or a filter (--mine, --owner, --state), not both");
  }
  if (args.GetBool("mine") && args.Has("owner")) {
    return absl::InvalidArgumentError("--mine and --owner exclude each other");
  }
  // Whose experiments is always said: an admin's bare '--state queued' would empty everyone's
  // queue.
  if (!args.GetBool("mine") && !args.Has("owner")) {
    return absl::InvalidArgumentError(
        "--state needs --mine or --owner USER: whose experiments to cancel");
  }
  vramlab::v1::ListExperimentsRequest request;
  RETURN_IF_ERROR(AddStateFilter(args.GetAll("state"), request));
  for (int state : request.states()) {
    if (state != Experiment::QUEUED && state != Experiment::RUNNING) {
      return absl::InvalidArgumentError(
          absl::StrCat("--state: only queued and running experiments can be cancelled, not ",
                       StateName(static_cast<Experiment::State>(state))));
    }
  }
  if (request.states().empty()) {
    request.add_states(Experiment::QUEUED);
    request.add_states(Experiment::RUNNING);
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  if (auto v = args.Get("owner")) {
    if (v->empty()) return absl::InvalidArgumentError("--owner: must not be empty");
    request.set_owner(*v);
  }
  // The daemon knows whose token called; without tokens every caller is the local user.
  if (args.GetBool("mine")) request.set_mine(true);
  ASSIGN_OR_RETURN(vramlab::v1::ListExperimentsResponse matching,
                   ListMatching(*client, request, /*limit=*/0));
  std::vector<std::string> queued, running;
  // Newest first from the daemon: walked backwards, oldest first.
  for (int i = matching.experiments_size() - 1; i >= 0; --i) {
    const Experiment& e = matching.experiments(i);
    (e.state() == Experiment::QUEUED ? queued : running).push_back(e.id());
  }
  queued.insert(queued.end(), running.begin(), running.end());
  return queued;
}

}  // namespace

void DeclareCancelFlags(FlagSet& flags) {
  flags.Bool("mine", "instead of IDs: every queued or running experiment of the caller")
      .Value("owner", "USER", "instead of IDs: every queued or running experiment of USER")
      .Value("state", "S,...",
             "with --mine or --owner: only these states (queued, running; repeatable)")
      .Completes({"queued", "running"});
}

absl::StatusOr<int> RunCancel(CommandEnv& env) {
  const ParsedArgs& args = env.args();
  std::vector<std::string> ids = args.positionals();
  if (args.GetBool("mine") || args.Has("owner") || args.Has("state")) {
    ASSIGN_OR_RETURN(ids, CancelFilterIds(env));
    if (ids.empty()) {
      if (!env.json()) env.err() << "vramlab: cancel: no experiment matches\n";
      return kExitOk;
    }
  } else if (ids.empty()) {
    return absl::InvalidArgumentError(
        "vramlab cancel needs at least one experiment ID, or a filter (--mine, --owner, "
        "--state)");
  }
  return ForEachIdOf<Experiment>(
      env, "cancel", ids,
      [](DaemonClient& client, const std::string& id) { return client.Cancel(id); },
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
