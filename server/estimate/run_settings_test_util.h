// Test helper: the RunSettings of a spec written as JSON.
#ifndef VRAMLAB_SERVER_ESTIMATE_RUN_SETTINGS_TEST_UTIL_H_
#define VRAMLAB_SERVER_ESTIMATE_RUN_SETTINGS_TEST_UTIL_H_

#include <string>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/estimate/run_settings.h"

namespace vramlab::server::estimate {

// `json`, an ExperimentSpec, resolved; a parse or resolve error fails the calling test and gives
// default settings.
inline RunSettings RunSettingsFromJson(const std::string& json) {
  vramlab::v1::ExperimentSpec spec;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &spec).ok()) << json;
  const absl::StatusOr<RunSettings> run = ResolveRunSettings(spec);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : RunSettings();
}

}  // namespace vramlab::server::estimate

#endif  // VRAMLAB_SERVER_ESTIMATE_RUN_SETTINGS_TEST_UTIL_H_
