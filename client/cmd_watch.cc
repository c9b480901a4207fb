// vramlab watch ID: follow an experiment to its end.
#include "client/commands.h"
#include "client/follow_view.h"
#include "common/status_macros.h"

namespace vramlab::client {

void DeclareWatchFlags(FlagSet& flags) {
  flags.Bool("quiet", "print nothing until the end, then only the outcome line");
}

absl::StatusOr<int> RunWatch(CommandEnv& env) {
  ASSIGN_OR_RETURN(std::string id, SingleId(env.args(), "watch"));
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  // Fetching first turns a mistyped id into NOT_FOUND before any view is drawn.
  ASSIGN_OR_RETURN(vramlab::v1::Experiment experiment, client->Get(id));
  return FollowAndShow(env, experiment,
                       env.args().GetBool("quiet") ? FollowMode::kOutcome : FollowMode::kLive);
}

}  // namespace vramlab::client
