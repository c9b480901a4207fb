// vramlab ls / show / server: one request, one answer.
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/byte_size.h"
#include "client/commands.h"
#include "client/describe.h"
#include "client/exit_codes.h"
#include "client/experiment_details.h"
#include "client/experiment_list.h"
#include "client/flag_values.h"
#include "client/list_filter.h"
#include "client/text_table.h"
#include "common/status_macros.h"

namespace vramlab::client {

using vramlab::v1::Experiment;

void DeclareListFlags(FlagSet& flags) {
  flags.Value("state", "S,...", "only these states (queued,running,succeeded,oom,...; repeatable)")
      .Completes({"queued", "running", "succeeded", "oom", "failed", "cancelled", "interrupted"})
      .Value("owner", "USER", "only this owner's experiments")
      .Bool("mine", "only the caller's own experiments (the user its token names)")
      .Value("limit", "N", "at most N experiments (default 50; 0: all)");
}

absl::StatusOr<int> RunList(CommandEnv& env) {
  const ParsedArgs& args = env.args();
  if (!args.positionals().empty()) {
    return absl::InvalidArgumentError("vramlab ls takes no positional arguments");
  }
  vramlab::v1::ListExperimentsRequest request;
  RETURN_IF_ERROR(AddStateFilter(args.GetAll("state"), request));
  if (auto v = args.Get("owner")) request.set_owner(*v);
  if (args.GetBool("mine")) request.set_mine(true);
  int32_t limit = 50;
  if (auto v = args.Get("limit")) {
    ASSIGN_OR_RETURN(limit, ParseIntFlag("limit", *v, 0, INT32_MAX));
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  ASSIGN_OR_RETURN(vramlab::v1::ListExperimentsResponse all, ListMatching(*client, request, limit));
  if (env.json()) {
    env.PrintJson(all);
    return kExitOk;
  }
  env.out() << RenderExperimentList(all);
  return kExitOk;
}

absl::StatusOr<int> RunShow(CommandEnv& env) {
  ASSIGN_OR_RETURN(std::string id, SingleId(env.args(), "show"));
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  ASSIGN_OR_RETURN(Experiment experiment, client->Get(id));
  if (env.json()) {
    env.PrintJson(experiment);
  } else {
    env.out() << RenderExperimentDetails(experiment);
  }
  return kExitOk;
}

void DeclareServerFlags(FlagSet& flags) {
  flags.Bool("health", "only the standard health check (no token needed): for HEALTHCHECK probes");
}

absl::StatusOr<int> RunServer(CommandEnv& env) {
  if (!env.args().positionals().empty()) {
    return absl::InvalidArgumentError("vramlab server takes no positional arguments");
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  if (env.args().GetBool("health")) {
    RETURN_IF_ERROR(client->CheckHealth());
    if (!env.json()) env.out() << "SERVING\n";
    if (env.json()) env.out() << "{\"status\": \"SERVING\"}\n";
    return kExitOk;
  }
  ASSIGN_OR_RETURN(vramlab::v1::ServerInfo info, client->GetServerInfo());
  if (env.json()) {
    env.PrintJson(info);
    return kExitOk;
  }
  const char* device = info.device() == vramlab::v1::CUDA  ? "cuda"
                       : info.device() == vramlab::v1::CPU ? "cpu"
                                                           : "unspecified";
  std::string out =
      absl::StrCat("vramlabd ", info.version(), " at ", client->address(), ", device ", device,
                   ", up since ", FormatTimestamp(info.start_time()), "\n");
  absl::StrAppend(&out, "queue:   ", info.queue_depth(), " queued, ", info.running(), " running\n");
  absl::StrAppend(
      &out, "limits:  ", info.max_queued_per_user(), " queued per user, ", info.max_queued_total(),
      " queued in all, time limit ", FormatSeconds(info.default_time_limit_seconds()), " (max ",
      FormatSeconds(info.max_time_limit_seconds()), "), max seq_len ", info.max_seq_len(), "\n");
  absl::StrAppend(&out, "auth:    ", info.auth_enabled() ? "tokens required" : "off", "\n");
  if (!info.worker_path().empty()) absl::StrAppend(&out, "worker:  ", info.worker_path(), "\n");
  using Align = TextTable::Align;
  TextTable slots({"SLOT", "DEVICE", "MEMORY", "RUNNING"},
                  {Align::kRight, Align::kLeft, Align::kRight, Align::kLeft});
  for (const auto& gpu : info.gpus()) {
    slots.AddRow({absl::StrCat(gpu.index()), gpu.name(),
                  gpu.total_memory_bytes() > 0 ? FormatBytes(gpu.total_memory_bytes()) : "-",
                  gpu.running_experiment_id().empty() ? "-" : gpu.running_experiment_id()});
  }
  absl::StrAppend(&out, "\n", slots.Render());
  env.out() << out;
  return kExitOk;
}

}  // namespace vramlab::client
