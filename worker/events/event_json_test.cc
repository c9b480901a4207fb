#include "worker/events/event_json.h"

#include <limits>

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

TEST(EventJsonTest, UsesTheCanonicalProtoJsonMapping) {
  MemorySample sample;
  sample.allocated_bytes = 9007199254740993LL;  // 2^53 + 1: would lose precision as a JSON number
  sample.position = LoopPosition{Phase::kOptimizerStep, 3, 1, 2};
  const nlohmann::json j = ToJson(sample);
  EXPECT_EQ(j["allocatedBytes"], "9007199254740993");
  EXPECT_EQ(j["phase"], "OPTIMIZER_STEP");
  EXPECT_EQ(j["microStep"], 1);
  EXPECT_EQ(j["sweepIndex"], 2);
  EXPECT_FALSE(j.contains("hasFreeBlockFragmentation")) << "only phase-boundary readings carry it";
}

TEST(EventJsonTest, NonFiniteDoublesAreStrings) {
  StepResult step;
  step.loss = std::numeric_limits<double>::quiet_NaN();
  step.mfu = std::numeric_limits<double>::infinity();
  const nlohmann::json j = ToJson(step);
  EXPECT_EQ(j["loss"], "NaN");
  EXPECT_EQ(j["mfu"], "Infinity");
}

TEST(EventJsonTest, ErrorsAndNoticesUseEnumNames) {
  EXPECT_EQ(ToJson(WorkerError{ErrorKind::kInvalidSpec, "bad", "training.seq_len"}),
            (nlohmann::json{
                {"kind", "INVALID_SPEC"}, {"message", "bad"}, {"field", "training.seq_len"}}));
  EXPECT_EQ(NoticeJson(NoticeLevel::kWarning, "x")["level"], "WARNING");
}

}  // namespace
}  // namespace vramlab::worker
