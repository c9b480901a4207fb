// Four finished runs of the real worker on a real daemon (two CPU slots) whose reports differ in
// shape: a normal run, an OOM, a sequence-length sweep whose last point runs out of memory, and a
// two-rank run. Shared by the report tests of every picture and trace format.
#ifndef VRAMLAB_TESTS_CLI_REPORT_RUNS_H_
#define VRAMLAB_TESTS_CLI_REPORT_RUNS_H_

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"

namespace vramlab::cli_test {

// Run kind -> submit arguments (--addr and --wait are added).
inline const std::map<std::string, std::vector<std::string>>& ReportRunArgs() {
  static const auto* const kRuns = new std::map<std::string, std::vector<std::string>>{
      {"normal",
       {"--preset", "tiny", "--dtype", "fp32", "--seq-len", "64", "--micro-batch", "2", "--accum",
        "2", "--steps", "2", "--sample-interval", "1", "--memory-limit", "64MiB", "--name",
        "normal"}},
      {"oom",
       {"--spec", std::string(VRAMLAB_SOURCE_DIR) + "/experiments/cpu/01-basic-sad-path.json"}},
      {"sweep",
       {"--preset", "tiny", "--dtype", "fp32", "--steps", "2", "--memory-limit", "6MiB",
        "--sweep-seq-lens", "64,128,256", "--name", "sweep"}},
      {"parallel",
       {"--preset", "tiny", "--dtype", "fp32", "--seq-len", "64", "--steps", "2", "--world-size",
        "2", "--sharding", "optimizer", "--name", "parallel"}},
  };
  return *kRuns;
}

// A suite whose daemon ran every report run once; ids_ maps the kind to its experiment id.
template <typename Suite>
class ReportRunsTest : public SharedDaemonTest<Suite> {
 public:
  static std::vector<std::string> DaemonFlags() { return {"--cpu-slots=2"}; }

 protected:
  static void SetUpTestSuite() {
    SharedDaemonTest<Suite>::SetUpTestSuite();
    if (SharedDaemonTest<Suite>::daemon_ == nullptr) return;
    for (const auto& [kind, args] : ReportRunArgs()) {
      std::vector<std::string> submit = {"submit", "--addr",
                                         SharedDaemonTest<Suite>::daemon_->address(), "--wait"};
      submit.insert(submit.end(), args.begin(), args.end());
      const CliResult r = RunCli(submit);
      // --wait exits 0 for a success and 3 for an OOM (the documented exit codes).
      ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << kind << "\n" << Describe(r);
      ids_[kind] = r.OutLines().at(0);
    }
  }
  void SetUp() override {
    SharedDaemonTest<Suite>::SetUp();
    ASSERT_EQ(ids_.size(), ReportRunArgs().size());
  }

  static CliResult Report(const std::string& kind, const std::string& format,
                          const std::string& output) {
    return RunCli({"report", ids_.at(kind), "--addr", SharedDaemonTest<Suite>::daemon_->address(),
                   "--format", format, "-o", output});
  }

  static inline std::map<std::string, std::string> ids_;
};

}  // namespace vramlab::cli_test

#endif  // VRAMLAB_TESTS_CLI_REPORT_RUNS_H_
