// vramlab submit / vramlab estimate: both build a spec from --spec and flags.
#include <unistd.h>

#include <random>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/anatomy_table.h"
#include "client/byte_size.h"
#include "client/commands.h"
#include "client/describe.h"
#include "client/exit_codes.h"
#include "client/fit_verdict_text.h"
#include "client/follow_view.h"
#include "client/parallel_estimate_text.h"
#include "client/spec_builder.h"
#include "common/protobuf/blank_message.h"
#include "common/status_macros.h"

namespace vramlab::client {
namespace {

// 128 random bits as hex: the idempotency key of one `submit` invocation.
std::string NewRequestId() {
  std::random_device device;
  std::mt19937_64 generator((static_cast<uint64_t>(device()) << 32) ^ device());
  return absl::StrFormat("%016x%016x", generator(), generator());
}

// --command: the positionals become spec.command.argv; the model and training fields, when any
// flag or --spec set them, are the equivalent spec used for the prediction.
absl::Status MakeCommandSpec(const ParsedArgs& args, vramlab::v1::ExperimentSpec& spec) {
  auto* command = spec.mutable_command();
  command->clear_argv();
  for (const std::string& arg : args.positionals()) command->add_argv(arg);
  if (auto dir = args.Get("working-dir")) {
    command->set_working_dir(*dir);
  } else if (command->working_dir().empty()) {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) {
      return absl::InvalidArgumentError("--working-dir: the current directory is unknown");
    }
    command->set_working_dir(cwd);
  }
  if (IsBlank(spec.model())) spec.clear_model();
  if (IsBlank(spec.training())) spec.clear_training();
  command->set_has_equivalent_spec(spec.has_model() || spec.has_training());
  return absl::OkStatus();
}

}  // namespace

void DeclareSubmitFlags(FlagSet& flags) {
  AddSpecFlags(flags);
  flags.Bool("wait", "block until the experiment ends; exit code tells the outcome")
      .Bool("watch", "follow the experiment live (as 'vramlab watch')")
      .Value("request-id", "KEY", "idempotency key (default: random); resubmitting it is a no-op")
      .Bool("dry-run", "print the spec that would be submitted and exit")
      .Bool("force", "submit even if the estimated peak exceeds the daemon's device memory")
      .Value("after", "ID", "start only after experiment ID has ended, whatever its outcome")
      .Value("after-ok", "ID",
             "start only after experiment ID has succeeded; if it ends otherwise this one ends "
             "CANCELLED")
      .Bool("command",
            "run your own program: the arguments after -- are its argv (absolute program path); "
            "model and training flags then describe it for the prediction only")
      .Value("working-dir", "DIR", "with --command: where the program starts (default: here)");
}

absl::StatusOr<int> RunSubmit(CommandEnv& env) {
  const ParsedArgs& args = env.args();
  const bool command = args.GetBool("command");
  if (command && args.positionals().empty()) {
    return absl::InvalidArgumentError(
        "--command: give the program and its arguments after --, e.g. "
        "vramlab submit --command -- /usr/bin/python3 train.py");
  }
  if (!command && args.Has("working-dir")) {
    return absl::InvalidArgumentError("--working-dir: only with --command");
  }
  if (!command && !args.positionals().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vramlab submit takes no positional arguments (got \"", args.positionals()[0],
                     "\"); use --spec FILE for a spec file"));
  }
  if (args.GetBool("wait") && args.GetBool("watch")) {
    return absl::InvalidArgumentError("--wait and --watch exclude each other");
  }
  ASSIGN_OR_RETURN(vramlab::v1::ExperimentSpec spec, BuildSpec(args));
  if (command) RETURN_IF_ERROR(MakeCommandSpec(args, spec));
  if (args.GetBool("dry-run")) {
    env.PrintJson(spec);
    return kExitOk;
  }
  vramlab::v1::SubmitExperimentRequest request;
  *request.mutable_spec() = spec;
  request.set_request_id(args.Get("request-id").value_or(NewRequestId()));
  request.set_force(args.GetBool("force"));
  const auto after = args.Get("after");
  const auto after_ok = args.Get("after-ok");
  if (after.has_value() && after_ok.has_value()) {
    return absl::InvalidArgumentError("--after and --after-ok exclude each other");
  }
  if (after.has_value() || after_ok.has_value()) {
    const std::string& id = after.has_value() ? *after : *after_ok;
    if (id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(after.has_value() ? "--after" : "--after-ok", ": needs an experiment ID"));
    }
    request.set_after_id(id);
    request.set_after_ok(after_ok.has_value());
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  ASSIGN_OR_RETURN(vramlab::v1::Experiment experiment, client->Submit(request));
  if (args.GetBool("watch")) {
    env.out() << (env.json() ? MessageToJson(experiment, false) : experiment.id() + "\n");
    env.out().flush();
    return FollowAndShow(env, experiment, FollowMode::kLive);
  }
  if (args.GetBool("wait")) {
    if (!env.json()) env.out() << experiment.id() << std::endl;
    return FollowAndShow(env, experiment, FollowMode::kQuiet);
  }
  if (env.json()) {
    env.PrintJson(experiment);
  } else {
    env.out() << experiment.id() << "\n";
  }
  return kExitOk;
}

void DeclareEstimateFlags(FlagSet& flags) {
  AddSpecFlags(flags);
  flags.Value("limit", "SIZE", "compare with this memory instead of the spec's --memory-limit");
  flags.Bool("smallest-world-size",
             "also find the smallest --world-size whose rank fits the limit, for --sharding");
}

absl::StatusOr<int> RunEstimate(CommandEnv& env) {
  const ParsedArgs& args = env.args();
  if (!args.positionals().empty()) {
    return absl::InvalidArgumentError("vramlab estimate takes no positional arguments");
  }
  vramlab::v1::EstimateMemoryRequest request;
  ASSIGN_OR_RETURN(*request.mutable_spec(), BuildSpec(args));
  if (auto limit = args.Get("limit")) {
    auto bytes = ParseByteSize(*limit);
    if (!bytes.ok())
      return absl::InvalidArgumentError(absl::StrCat("--limit: ", bytes.status().message()));
    request.set_limit_bytes(*bytes);
  }
  request.set_smallest_world_size(args.GetBool("smallest-world-size"));
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  ASSIGN_OR_RETURN(vramlab::v1::MemoryEstimate estimate, client->Estimate(request));
  if (env.json()) {
    env.PrintJson(estimate);
    return kExitOk;
  }
  std::string out = absl::StrCat("settings:   ", SpecSummary(request.spec()), "\n");
  absl::StrAppend(&out, "parameters: ", estimate.parameter_count(), "\n");
  absl::StrAppend(&out, "peak:       ", FormatBytes(estimate.predicted_peak_bytes()), " in ",
                  PhaseName(estimate.peak_phase()), "\n");
  if (estimate.limit_bytes() > 0) {
    absl::StrAppend(&out, "limit:      ", FormatBytes(estimate.limit_bytes()), ": ",
                    VerdictDetail(estimate), "\n");
    absl::StrAppend(&out, "max fitting seq_len ", estimate.max_seq_len_that_fits(),
                    ", max fitting micro-batch ", estimate.max_micro_batch_that_fits(),
                    " (others unchanged; not ruled out up to ",
                    estimate.max_seq_len_not_ruled_out(), " and ",
                    estimate.max_micro_batch_not_ruled_out(), ")\n");
  }
  const auto& sweep = request.spec().sweep();
  const char* variable =
      sweep.variable() == vramlab::v1::MICRO_BATCH_SIZE ? "micro_batch" : "seq_len";
  if (estimate.points_size() > 0) {
    absl::StrAppend(
        &out, "\nsweep, predicted per point (the anatomy below is of the first, ", variable, " ",
        estimate.points(0).value(), "):\n",
        RenderPredictedSweep(estimate, variable, sweep.mode() == vramlab::v1::SEARCH_MAX));
  }
  absl::StrAppend(&out, "\n", RenderAnatomyTable(nullptr, &estimate.anatomy()));
  if (std::string rank = RenderParallelEstimate(estimate); !rank.empty()) {
    absl::StrAppend(&out, "\n", rank);
  }
  if (estimate.parallel().points_size() > 0) {
    // Each point runs as its own gang of ranks.
    absl::StrAppend(&out, "\nsweep, predicted per point for one rank:\n",
                    RenderPredictedSweep(RankAsEstimate(estimate), variable,
                                         sweep.mode() == vramlab::v1::SEARCH_MAX));
  }
  if (estimate.notes_size() > 0) {
    absl::StrAppend(&out, "\nnotes:\n");
    for (const auto& note : estimate.notes()) absl::StrAppend(&out, "  ", note, "\n");
  }
  env.out() << out;
  return kExitOk;
}

}  // namespace vramlab::client
