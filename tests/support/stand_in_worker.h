// A shell script standing in for vramlab-worker in tests of the queue, where what matters is when
// experiments start and how they end, not what they measure. What it does is chosen by the
// spec's name (the daemon passes --spec FILE first):
//   "hang..."   writes "hanging" to its log and sleeps until stopped;
//   "fail..."   exits 1 without a report (FAILED);
//   "slowlog..."writes "line 1" .. "line 5" to its log 300 ms apart, then succeeds;
//   "events..." sends 3000 memory samples, then succeeds (a store with something to reclaim);
//   anything else sends a final report and exits 0 (SUCCEEDED).
// Header-only: tests/ compiles only *_test.cc and support/*.cc.
#ifndef VRAMLAB_TESTS_SUPPORT_STAND_IN_WORKER_H_
#define VRAMLAB_TESTS_SUPPORT_STAND_IN_WORKER_H_

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

namespace vramlab::testing {

// Writes the script into a fresh directory under /tmp; returns its path (the caller removes the
// directory, its parent).
inline std::string WriteStandInWorker() {
  char dir_template[] = "/tmp/vramlab-stand-in-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string path = dir + "/worker.sh";
  std::ofstream(path) << R"(#!/bin/sh
spec="$2"
report() { echo '{"report":{}}' >&3; exit 0; }
if grep -q '"name":"hang' "$spec"; then echo hanging >&2; exec sleep 600; fi
if grep -q '"name":"fail' "$spec"; then echo failing >&2; exit 1; fi
if grep -q '"name":"slowlog' "$spec"; then
  for i in 1 2 3 4 5; do echo "line $i" >&2; sleep 0.3; done
  report
fi
if grep -q '"name":"events' "$spec"; then
  i=0
  while [ $i -lt 3000 ]; do
    echo '{"sample":{"allocatedBytes":"1048576","reservedBytes":"2097152"}}'
    i=$((i + 1))
  done >&3
  report
fi
report
)";
  chmod(path.c_str(), 0755);
  return path;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_SUPPORT_STAND_IN_WORKER_H_
