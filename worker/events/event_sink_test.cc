// EventSink's batching of samples: held back for a short window, never reordered with other
// events, written out whole.
#include "worker/events/event_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace vramlab::worker {
namespace {

class EventSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe(fds_), 0);
    ASSERT_EQ(::fcntl(fds_[0], F_SETFL, O_NONBLOCK), 0);
  }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  // Everything readable now.
  std::string Drain() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds_[0], buf, sizeof(buf))) > 0;)
      out.append(buf, static_cast<size_t>(n));
    return out;
  }
  static MemorySample SampleAt(int64_t allocated) {
    MemorySample s;
    s.allocated_bytes = allocated;
    return s;
  }

  int fds_[2];
};

TEST_F(EventSinkTest, SamplesWaitAndGoOutBeforeTheNextOtherEvent) {
  EventSink sink(fds_[1]);
  sink.Sample(SampleAt(1));
  sink.Sample(SampleAt(2));
  EXPECT_EQ(Drain(), "");  // within the batch window
  sink.Notice(NoticeLevel::kInfo, "after");
  const std::string out = Drain();
  const size_t first = out.find("\"allocatedBytes\":\"1\"");
  const size_t second = out.find("\"allocatedBytes\":\"2\"");
  const size_t notice = out.find("after");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  ASSERT_NE(notice, std::string::npos) << out;
  EXPECT_LT(first, second);
  EXPECT_LT(second, notice);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(sink.lines_accepted(), 3);
}

TEST_F(EventSinkTest, ASampleAfterTheWindowWritesTheBatch) {
  EventSink sink(fds_[1]);
  sink.Sample(SampleAt(1));
  std::this_thread::sleep_for(EventSink::kSampleBatchWindow + std::chrono::milliseconds(10));
  sink.Sample(SampleAt(2));
  const std::string out = Drain();
  EXPECT_NE(out.find("\"allocatedBytes\":\"1\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"allocatedBytes\":\"2\""), std::string::npos) << out;
}

TEST_F(EventSinkTest, FlushAndDestructionWriteWhatWaits) {
  {
    EventSink sink(fds_[1]);
    sink.Sample(SampleAt(1));
    sink.Flush();
    EXPECT_NE(Drain().find("\"allocatedBytes\":\"1\""), std::string::npos);
    sink.Sample(SampleAt(2));
  }
  EXPECT_NE(Drain().find("\"allocatedBytes\":\"2\""), std::string::npos);
}

}  // namespace
}  // namespace vramlab::worker
