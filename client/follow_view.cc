#include "client/follow_view.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/exit_codes.h"
#include "client/experiment_details.h"
#include "client/follow.h"
#include "client/watch_state.h"
#include "common/status_macros.h"

namespace vramlab::client {
namespace {

using vramlab::v1::Experiment;
using vramlab::v1::ExperimentEvent;

// Redraws a block of lines at the bottom of the terminal; log lines scroll above it. Not
// thread-safe: driven from the one thread that reads the stream.
class TerminalFrame {
 public:
  explicit TerminalFrame(std::ostream& out) : out_(out) {}

  void Log(const std::string& line) {
    Erase();
    out_ << line << '\n';
  }
  // Redraws unless the last draw was less than 100 ms ago (samples arrive every ~10 ms).
  void Draw(const std::string& frame, bool force) {
    const absl::Time now = absl::Now();
    if (!force && lines_ > 0 && now - last_draw_ < absl::Milliseconds(100)) return;
    Erase();
    out_ << frame;
    out_.flush();
    lines_ = static_cast<int>(std::count(frame.begin(), frame.end(), '\n'));
    last_draw_ = now;
  }

 private:
  void Erase() {
    // Cursor up to the frame's first line, column 0, clear to the end of the screen.
    if (lines_ > 0) out_ << "\x1b[" << lines_ << "F\x1b[J";
    lines_ = 0;
  }

  std::ostream& out_;
  int lines_ = 0;
  absl::Time last_draw_ = absl::InfinitePast();
};

}  // namespace

absl::StatusOr<int> FollowAndShow(CommandEnv& env, const Experiment& experiment, FollowMode mode) {
  ASSIGN_OR_RETURN(DaemonClient * client, env.Client());
  WatchState state(experiment);
  TerminalFrame frame(env.out());
  const bool json = env.json();
  const bool live = mode == FollowMode::kLive;
  const bool ansi = env.tty() && !json && live;
  FollowOptions options;
  // The live view wants the memory history for its sparkline; --wait needs none of it.
  options.skip_history_samples = !live;
  if (ansi) frame.Draw(state.RenderFrame(), true);
  auto final_experiment =
      FollowExperiment(*client, experiment.id(), options, [&](const ExperimentEvent& event) {
        if (!live) return;
        if (json) {
          env.out() << MessageToJson(event, false);
          env.out().flush();
          return;
        }
        if (event.has_state_change() && event.state_change().state() == Experiment::QUEUED) {
          // The estimate moves with the queue; a failed fetch keeps the last one.
          absl::StatusOr<Experiment> now_queued = client->Get(experiment.id());
          if (now_queued.ok()) state.SetStartEstimate(*now_queued);
        }
        std::optional<std::string> line = state.Apply(event);
        if (ansi) {
          if (line.has_value()) frame.Log(*line);
          frame.Draw(state.RenderFrame(), line.has_value());
        } else if (line.has_value()) {
          env.out() << *line << '\n';
          env.out().flush();
        }
      });
  if (!final_experiment.ok()) {
    if (ansi) frame.Log("");
    return final_experiment.status();
  }
  if (json) {
    if (!live) env.PrintJson(*final_experiment);
  } else if (mode == FollowMode::kOutcome) {
    env.out() << RenderOutcomeLine(*final_experiment);
    env.out().flush();
  } else {
    if (ansi) frame.Draw(state.RenderFrame(), true);  // the last frame stays on screen
    env.out() << "\n" << RenderOutcome(*final_experiment);
    env.out().flush();
  }
  return ExitCodeForState(final_experiment->state());
}

}  // namespace vramlab::client
