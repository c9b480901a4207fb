// The Engine with a shell script standing in for a one-process sweep's worker, for the tests of
// its resume after a restart (engine_one_process_sweep_resume_test.cc). The script runs in either
// of the worker's two ways:
//
//  - the whole sweep in one process (no --sweep-point): it records its arguments in ROOT/ID.0.args,
//    waits for ROOT/ID.plan (the test's: "list" or "search", then the values in the order the
//    points run, one a line) and runs those points in order, stopping a LIST at its first point out
//    of memory; at each point it creates ROOT/ID.INDEX.whole, then ends the point as the test
//    says, and at the end sends the sweep's one report and exits 3 when a LIST stopped, else 0;
//  - one point (--sweep-point INDEX:VALUE): it records its arguments in ROOT/ID.INDEX.0.args,
//    ends the point as the test says, sends the point's report and exits 3 when it ran out, else 0.
//
// A point INDEX ends fitting once ROOT/release-ID.INDEX exists, out of memory (an `oom` answer
// first) once ROOT/ID.INDEX.0.oom does: EngineGangTest's Release(PointTag(id, INDEX)) and
// RunOutOfMemory(PointTag(id, INDEX), 0) drive both ways alike. Every number of a point is made
// from its value V (peak 1000 V bytes, loss V.5, ...), and the reports merge the points by the
// worker's rule (worker/train/experiment_runner.cc), so a sweep's results do not depend on which
// way its points ran. Each process first sends `started` (device "cpu", 42 parameters).
#ifndef VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_ONE_PROCESS_SWEEP_FIXTURE_H_
#define VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_ONE_PROCESS_SWEEP_FIXTURE_H_

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "server/engine/testing/engine_gang_fixture.h"

namespace vramlab::server::testing {

class EngineOneProcessSweepTest : public EngineGangTest {
 protected:
  static constexpr const char* kSweepWorkerScript = R"(point=
for a in "$@"; do
  [ "$prev" = --sweep-point ] && point=$a
  prev=$a
done
id=$VRAMLAB_EXPERIMENT_ID
echo '{"started":{"deviceName":"cpu","parameterCount":"42"}}' >&3
# The numbers of the point at value $1; $2 names its step time (a result's or a report's).
numbers() {
  echo "\"anatomy\":{\"peakAllocatedBytes\":\"$(($1 * 1000))\"},\"$2\":0.$1,"\
"\"tokensPerSecond\":$(($1 * 10)),\"mfu\":0.00$1,\"finalLoss\":$1.5,\"attentionBackend\":\"eager\""
}
# Point $1 at value $2: ends as the test says; sends its answer and result; sets oom and result.
run_point() {
  while [ ! -e $root/release-$id.$1 ] && [ ! -e $root/$id.$1.0.oom ]; do sleep 0.02; done
  oom=false
  if [ -e $root/$id.$1.0.oom ]; then
    oom=true
    echo "{\"oom\":{\"message\":\"out of memory\",\"step\":2,\"sweepIndex\":$1}}" >&3
  fi
  result="{\"sweepIndex\":$1,\"value\":$2,\"oom\":$oom,$(numbers $2 stepTimeSeconds)}"
  echo "{\"sweepPoint\":$result}" >&3
  points=${points:+$points,}$result
  last=$2
  if [ $oom = false ] && { [ -z "$best" ] || [ $2 -gt $best ]; }; then best=$2; fi
}
# The report over the points run: the first of the largest value that fit, else the last point.
report() {
  echo "{\"report\":{\"sweepPoints\":[$points],\"largestFittingValue\":${best:-0},"\
"$(numbers ${best:-$last} medianStepTimeSeconds),\"parameterCount\":\"42\",\"deviceName\":\"cpu\"}}" >&3
}
points=; best=; last=
if [ -n "$point" ]; then
  index=${point%%:*}
  echo "$@" > $root/$id.$index.0.args
  run_point $index ${point#*:}
  report
  [ $oom = true ] && exit 3
  exit 0
fi
echo "$@" > $root/$id.0.args
while [ ! -e $root/$id.plan ]; do sleep 0.02; done
read mode < $root/$id.plan
index=0; stopped=false
for value in $(tail -n +2 $root/$id.plan); do
  touch $root/$id.$index.whole
  run_point $index $value
  index=$((index + 1))
  if [ $mode = list ] && [ $oom = true ]; then stopped=true; break; fi
done
report
[ $stopped = true ] && exit 3
exit 0
)";

  void StartEngine() { StartEngineWith(kSweepWorkerScript, 1); }

  // Submits a one-process sweep (preset tiny, one step a point); its id in `*id`.
  void SubmitSweep(const vramlab::v1::SweepSpec& sweep, std::string* id) {
    auto submitted = Submit(1, 60, false, sweep);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    *id = submitted->id();
  }
  // Tells `id`'s whole-sweep worker the points it runs: `values` in order, a LIST or a search.
  void PlanWholeRun(const std::string& id, bool list, const std::vector<int>& values) {
    const std::string path = root_ + "/" + id + ".plan";
    {
      std::ofstream out(path + ".tmp");
      out << (list ? "list" : "search") << "\n";
      for (int value : values) out << value << "\n";
    }
    std::filesystem::rename(path + ".tmp", path);
  }
  // Whether `id`'s whole-sweep worker reached point `index`.
  bool Reached(const std::string& id, int index) const {
    return std::filesystem::exists(root_ + "/" + id + "." + std::to_string(index) + ".whole");
  }
  // Waits (up to 10 s) until `id`'s whole-sweep worker reaches point `index`.
  bool WaitReached(const std::string& id, int index) const {
    for (int i = 0; i < 500 && !Reached(id, index); ++i) absl::SleepFor(absl::Milliseconds(20));
    return Reached(id, index);
  }
  // Forgets which processes and points were started: Started() and Reached() are then true only
  // for those started after.
  void ForgetStarts() {
    for (const auto& entry : std::filesystem::directory_iterator(root_)) {
      const std::string extension = entry.path().extension();
      if (extension == ".args" || extension == ".whole") std::filesystem::remove(entry.path());
    }
  }
};

}  // namespace vramlab::server::testing

#endif  // VRAMLAB_SERVER_ENGINE_TESTING_ENGINE_ONE_PROCESS_SWEEP_FIXTURE_H_
