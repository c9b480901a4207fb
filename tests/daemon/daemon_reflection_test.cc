// Server reflection under both names a client may ask, grpc.reflection.v1 and v1alpha, through a
// real daemon and a client that is not ours (tests/daemon/reflection_client.py: Debian's grpcio,
// raw stream calls): both list the same services, both answer a symbol with its file and the
// files it imports, and both answer an unknown file NOT_FOUND without ending the stream.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

std::vector<std::string> Reflect(const std::string& address, const std::string& version) {
  const CommandResult r = RunCommand(
      {"/usr/bin/python3", SourceDir() + "/tests/daemon/reflection_client.py", address, version});
  EXPECT_EQ(r.exit_code, 0) << version << ": " << r.output;
  return absl::StrSplit(r.output, '\n', absl::SkipEmpty());
}

TEST(DaemonReflectionTest, V1AndV1alphaListTheServicesAndAnswerSymbols) {
  auto daemon =
      DaemonHarness::Start({.extra_flags = {"--worker-path=/bin/true"}, .enable_metrics = false});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::vector<std::string> v1 = Reflect((*daemon)->address(), "v1");
  const std::vector<std::string> v1alpha = Reflect((*daemon)->address(), "v1alpha");
  for (const auto* answers : {&v1, &v1alpha}) {
    EXPECT_THAT(*answers, Contains("service vramlab.v1.VramlabService"));
    EXPECT_THAT(*answers, Contains("service grpc.reflection.v1.ServerReflection"));
    EXPECT_THAT(*answers, Contains("service grpc.reflection.v1alpha.ServerReflection"));
    // The API's file first, then what it imports (the client needs them to build the types).
    EXPECT_THAT(*answers, Contains(::testing::StartsWith(
                              "file vramlab.v1.VramlabService vramlab/v1/service.proto ")));
    EXPECT_THAT(*answers,
                Contains(::testing::AllOf(::testing::StartsWith("file vramlab.v1.VramlabService"),
                                          HasSubstr(" vramlab/v1/experiment.proto"))));
    EXPECT_THAT(*answers, Contains("error no/such/file.proto 5 File not found."));
  }
  // The same services under both names.
  std::vector<std::string> services_v1, services_v1alpha;
  for (const auto& line : v1)
    if (line.rfind("service ", 0) == 0) services_v1.push_back(line);
  for (const auto& line : v1alpha)
    if (line.rfind("service ", 0) == 0) services_v1alpha.push_back(line);
  std::sort(services_v1.begin(), services_v1.end());
  std::sort(services_v1alpha.begin(), services_v1alpha.end());
  EXPECT_EQ(services_v1, services_v1alpha);
}

}  // namespace
}  // namespace vramlab::testing
