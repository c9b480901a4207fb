// vramlab report ID / vramlab compare ID ID...
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/anatomy_table.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/file_io.h"
#include "client/flag_values.h"
#include "client/follow.h"
#include "client/report_formats.h"
#include "client/report_svg.h"
#include "client/timeline.h"
#include "common/status_macros.h"

namespace vramlab::client {

void DeclareReportFlags(FlagSet& flags) {
  flags
      .Value("format", "F",
             "text|json|csv|svg|html|perfetto (default text; --json means json; perfetto: a Chrome "
             "trace for Perfetto's UI or chrome://tracing)")
      .Value("output", "FILE", "write to FILE instead of stdout")
      .Alias('o', "output");
}

absl::StatusOr<int> RunReport(CommandEnv& env) {
  ASSIGN_OR_RETURN(std::string id, SingleId(env.args(), "report"));
  int format = 0;
  static const std::vector<std::string> kFormats = {"text", "json", "csv",
                                                    "svg",  "html", "perfetto"};
  if (auto v = env.args().Get("format")) {
    ASSIGN_OR_RETURN(format, ParseChoiceFlag("format", *v, kFormats));
  } else if (env.json()) {
    format = 1;
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  ASSIGN_OR_RETURN(vramlab::v1::Experiment experiment, client->Get(id));
  if (!IsFinalState(experiment.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        id, " is ", vramlab::v1::Experiment::State_Name(experiment.state()),
        "; a report needs a finished experiment (follow it with: vramlab watch ", id, ")"));
  }
  std::vector<vramlab::v1::ExperimentEvent> events;
  FollowOptions options;
  options.single_pass = true;
  ASSIGN_OR_RETURN(experiment, FollowExperiment(*client, id, options,
                                                [&](const vramlab::v1::ExperimentEvent& event) {
                                                  events.push_back(event);
                                                }));
  const Timeline timeline = BuildTimeline(events);
  std::string rendered;
  switch (format) {
    case 1:
      rendered = RenderJsonReport(experiment, timeline);
      break;
    case 2:
      rendered = RenderCsvReport(timeline);
      break;
    case 3:
      rendered = absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                              RenderSvg(experiment, timeline));
      break;
    case 4:
      rendered = RenderHtmlReport(experiment, timeline);
      break;
    case 5:
      rendered = RenderTraceReport(experiment, events);
      break;
    default:
      rendered = RenderTextReport(experiment, timeline);
      break;
  }
  const std::string output = env.args().Get("output").value_or("-");
  RETURN_IF_ERROR(WriteFileAtomically(output, rendered));
  if (output != "-") {
    env.err() << "wrote " << kFormats[format] << " report of " << id << " to " << output << "\n";
  }
  return kExitOk;
}

absl::StatusOr<int> RunCompare(CommandEnv& env) {
  const auto& ids = env.args().positionals();
  if (ids.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("vramlab compare needs at least two experiment IDs (got ", ids.size(), ")"));
  }
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  vramlab::v1::ListExperimentsResponse experiments;
  for (const auto& id : ids) {
    ASSIGN_OR_RETURN(*experiments.add_experiments(), client->Get(id));
  }
  if (env.json()) {
    env.PrintJson(experiments);
    return kExitOk;
  }
  env.out() << RenderCompareTable(
      {experiments.experiments().begin(), experiments.experiments().end()});
  return kExitOk;
}

}  // namespace vramlab::client
