// The Engine with a shell script standing in for the worker, for the tests of gangs
// (engine_gang_test.cc) and of parallel sweeps (engine_gang_sweep_test.cc,
// engine_sweep_resume_test.cc). The script records its
// arguments and environment, then waits until the test releases its run and ends with a report
// (or, when the test says so, with an out-of-memory answer and exit 3, as the worker does). So
// the test decides when each gang ends and sees exactly which processes the Engine started.
//
// A run is named by its tag: the experiment id, and for a point of a parallel sweep (the rank got
// --sweep-point INDEX:VALUE) the id and ".INDEX" ("exp-000001.2"). The script writes
// ROOT/TAG.RANK.args and .env, ends when ROOT/release-TAG exists, and runs out of memory when
// ROOT/TAG.RANK.oom does. A sweep point's rank sends its result (`sweepPoint`) and its report of
// the point, as the worker's --sweep-point run does; they and its out-of-memory answer carry the
// point's index and value. Every process also writes kNoiseBytes to stderr (the experiment's log).
#ifndef VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_GANG_FIXTURE_H_
#define VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_GANG_FIXTURE_H_

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/engine/testing/engine_fixture.h"

namespace vramlab::server::testing {

class EngineGangTest : public EngineFixture {
 protected:
  static constexpr int kNoiseBytes = 3000;
  // After "root=ROOT" and "noise=N".
  static constexpr const char* kWorkerScript = R"(rank=0; point=
for a in "$@"; do
  [ "$prev" = --rank ] && rank=$a
  [ "$prev" = --sweep-point ] && point=$a
  prev=$a
done
tag=$VRAMLAB_EXPERIMENT_ID; index=0
if [ -n "$point" ]; then index=${point%%:*}; value=${point#*:}; tag=$tag.$index; fi
out=$root/$tag.$rank
echo "$@" > $out.args.part && mv $out.args.part $out.args
env > $out.env.part && mv $out.env.part $out.env
head -c $noise /dev/zero | tr '\0' x >&2
# A sweep point's result, then its report listing the point, as the worker's --sweep-point run
# sends them.
report() {
  points=
  if [ -n "$point" ]; then
    result="{\"sweepIndex\":$index,\"value\":$value,\"oom\":$1,\"finalLoss\":$2}"
    echo "{\"sweepPoint\":$result}" >&3
    points=",\"sweepPoints\":[$result]"
  fi
  echo "{\"report\":{\"finalLoss\":$2$points}}" >&3
}
while [ ! -e $root/release-$tag ]; do
  if [ -e $out.oom ]; then
    echo "{\"oom\":{\"message\":\"out of memory\",\"step\":2,\"sweepIndex\":$index}}" >&3
    [ -n "$point" ] && report true 0
    exit 3
  fi
  sleep 0.02
done
report false 1.0
)";

  void SetUp() override {
    EngineFixture::SetUp();
    unsetenv("OMP_NUM_THREADS");
  }
  void StartEngine(int slots, int64_t max_log_bytes = 8 << 20) {
    StartEngineWith(kWorkerScript, slots, max_log_bytes);
  }
  // StartEngine with `script` (after "root=ROOT" and "noise=N") standing in for the worker.
  void StartEngineWith(const std::string& script, int slots, int64_t max_log_bytes = 8 << 20) {
    const std::string worker =
        WriteWorker(absl::StrCat("root=", root_, "\nnoise=", kNoiseBytes, "\n", script));
    options_ = BaseOptions(worker, slots);
    options_.spec_limits.host_devices = slots;
    options_.worker_limits.cancel_grace_period = std::chrono::milliseconds(300);
    options_.worker_limits.max_log_bytes = max_log_bytes;
    CreateAndStart(options_);
  }
  // Shuts the Engine down (a running gang is stopped: INTERRUPTED), runs `while_down`, and
  // starts a new one on the same store and slots with --requeue-interrupted.
  void RestartRequeuing(const std::function<void()>& while_down = [] {}) {
    engine_.reset();
    while_down();
    options_.requeue_interrupted = true;
    CreateAndStart(options_);
  }

  absl::StatusOr<Experiment> Submit(
      int world_size, int time_limit_seconds, bool offload = false,
      const std::optional<vramlab::v1::SweepSpec>& sweep = std::nullopt) {
    vramlab::v1::SubmitExperimentRequest request;
    auto* spec = request.mutable_spec();
    spec->set_name("gang");
    spec->mutable_model()->set_preset("tiny");
    spec->mutable_training()->set_seq_len(32);
    spec->mutable_training()->set_micro_batch_size(1);
    spec->mutable_training()->set_steps(1);
    spec->mutable_training()->mutable_optimizer()->set_offload_to_cpu(offload);
    spec->set_time_limit_seconds(time_limit_seconds);
    if (world_size > 1) spec->mutable_parallel()->set_world_size(world_size);
    if (sweep.has_value()) *spec->mutable_sweep() = *sweep;
    return engine_->Submit(user_, request);
  }
  // The tag of point `index` of `id`'s sweep.
  static std::string PointTag(const std::string& id, int index) {
    return id + "." + std::to_string(index);
  }
  void Release(const std::string& tag) { std::ofstream(root_ + "/release-" + tag) << "go\n"; }
  // Makes `rank` of the run `tag` report an out-of-memory and exit 3, as the worker does.
  void RunOutOfMemory(const std::string& tag, int rank) {
    std::ofstream(root_ + "/" + tag + "." + std::to_string(rank) + ".oom") << "oom\n";
  }
  // Whether the run `tag`'s `rank` was started.
  bool Started(const std::string& tag, int rank) const {
    return std::filesystem::exists(root_ + "/" + tag + "." + std::to_string(rank) + ".args");
  }
  Experiment WaitState(const std::string& id, Experiment::State state) {
    return WaitUntil(id, [state](const Experiment& e) { return e.state() == state; });
  }
  // What the stand-in worker recorded for the run `tag`'s `rank` ("args" or "env"); waits for
  // the file.
  std::string Recorded(const std::string& tag, int rank, const std::string& what) {
    const std::string path = root_ + "/" + tag + "." + std::to_string(rank) + "." + what;
    for (int i = 0; i < 500 && !std::filesystem::exists(path); ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    // Written whole under another name, then renamed: a file that exists is complete. The pause
    // lets the daemon take in what the worker does next.
    absl::SleepFor(absl::Milliseconds(50));
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The value of `flag` in the arguments the run `tag`'s `rank` got; "" when absent.
  std::string FlagValue(const std::string& tag, int rank, const std::string& flag) {
    std::vector<std::string> args =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(Recorded(tag, rank, "args")), ' ');
    auto it = std::find(args.begin(), args.end(), flag);
    return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
  }
  std::string EnvValue(const std::string& tag, int rank, const std::string& name) {
    for (absl::string_view line : absl::StrSplit(Recorded(tag, rank, "env"), '\n')) {
      if (absl::StartsWith(line, name + "=")) return std::string(line.substr(name.size() + 1));
    }
    return "<unset>";
  }
  std::string LogPath(const std::string& id) const {
    return root_ + "/data/experiments/" + id + "/worker.log";
  }

  // Submits a two-rank sweep, lets its first point end and returns once both ranks of its second
  // point have started: the experiment's id in `*id`.
  void StartSweepOnItsSecondPoint(const vramlab::v1::SweepSpec& sweep, std::string* id) {
    auto submitted = Submit(2, 60, false, sweep);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    *id = submitted->id();
    Release(PointTag(*id, 0));
    const std::string second = PointTag(*id, 1);
    Recorded(second, 0, "args");
    Recorded(second, 1, "args");
  }

  EngineOptions options_;
};

}  // namespace vramlab::server::testing

#endif  // VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_GANG_FIXTURE_H_
