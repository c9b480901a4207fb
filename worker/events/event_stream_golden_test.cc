// The worker's event stream, byte for byte: every payload kind, and every field a writer sets only
// in some runs (free-block fragmentation, categories, gathered parameters, the peak moments),
// written through a real EventSink (the generated plain::WorkerEvent JSON writer) and compared with
// testdata/event_stream.golden.jsonl. The daemon parses these lines with protobuf's
// JsonStringToMessage, so any change in them is a change of the worker's contract: a new field
// changes the golden file (VRAMLAB_WRITE_GOLDEN=FILE writes the stream this build produces), and
// nothing else may.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "worker/events/event_sink.h"
#include "worker/events/worker_events.h"

namespace vramlab::worker {
namespace {

MemorySample Sample(int64_t base, bool detailed) {
  MemorySample s;
  s.time_seconds = 0.25 * static_cast<double>(base);
  s.allocated_bytes = base * 1000;
  s.reserved_bytes = base * 2000;
  s.active_bytes = base * 1100;
  s.inactive_split_bytes = base * 10;
  s.requested_bytes = base * 990;
  s.peak_allocated_bytes = base * 1500;
  s.peak_reserved_bytes = base * 2500;
  s.alloc_retries = base % 3;
  s.oom_count = base % 2;
  s.device_used_bytes = base * 3000;
  s.device_total_bytes = int64_t{150} << 30;
  s.fragmentation_ratio = 0.125;
  Stamp({Phase::kBackward, static_cast<int32_t>(base), 1, 2}, &s);
  if (detailed) {
    SetFreeBlockFragmentation(0.5, base * 7, &s);
    s.has_categories = true;
    s.categories = {base * 1, base * 2, base * 3, base * 4, base * 5, base * 6, base * 7};
  }
  return s;
}

MemoryAnatomy Anatomy(bool parallel) {
  MemoryAnatomy a;
  a.weights_bytes = 1;
  a.gradients_bytes = 2;
  a.optimizer_state_bytes = 3;
  a.activations_bytes = 4;
  a.temporary_buffers_bytes = 5;
  a.allocator_cache_bytes = 6;
  a.cuda_context_bytes = 7;
  a.peak_allocated_bytes = 8;
  a.peak_reserved_bytes = 9;
  a.peak_device_used_bytes = 10;
  a.fragmentation_ratio = 0.75;
  a.free_block_fragmentation_ratio = std::numeric_limits<double>::quiet_NaN();
  a.adapter_weights_bytes = 11;
  a.quantization_constants_bytes = 12;
  if (parallel) {
    a.gathered_parameters_bytes = int64_t{1} << 40;
    a.has_gathered_parameters_bytes = true;
    a.communication_buffers_bytes = 14;
    a.has_communication_buffers_bytes = true;
    a.has_at_peak_allocated = true;
    a.at_peak_allocated.allocated_bytes = 15;
    a.at_peak_allocated.categories = {1, 2, 3, 4, 5, 6, 7};
    a.at_peak_allocated.has_categories = true;
    Stamp({Phase::kForward, 1, 0, 0}, &a.at_peak_allocated);
    a.has_at_peak_reserved = true;
    a.at_peak_reserved.reserved_bytes = 17;
    a.at_peak_reserved.allocated_bytes = 16;
    a.at_peak_reserved.allocator_cache_bytes = 17 - 16;
    Stamp({Phase::kOptimizerStep, 2, 0, 1}, &a.at_peak_reserved);
  }
  return a;
}

PhaseEvent PhaseAt(PhaseEdge edge, const LoopPosition& position, const MemorySample& memory) {
  PhaseEvent e;
  Stamp(position, &e);
  e.edge = edge;
  e.memory = memory;
  return e;
}

void WriteEveryEvent(EventSink& sink) {
  sink.Started(
      {"0.1.0", "2.11.0", DeviceKind::kCuda, "NVIDIA H200", int64_t{150} << 30, 494032768, 4242});
  sink.Notice(NoticeLevel::kInfo, "attention: sdpa \"flash\"\n");
  sink.Notice(NoticeLevel::kWarning,
              "caf\xc3\xa9 \xff");  // invalid UTF-8 is replaced, never dropped
  sink.PhaseChange(PhaseAt(PhaseEdge::kBegin, {Phase::kLoad, 0, 0, 0}, Sample(1, false)));
  sink.Sample(Sample(2, false));
  sink.Sample(Sample(3, true));
  sink.PhaseChange(PhaseAt(PhaseEdge::kEnd, {Phase::kZeroGrad, 3, 1, 0}, Sample(4, true)));
  sink.Step({1, 0, 10.5, 0.125, 4096.0, 0.0, 5000, 6000});
  sink.Step({2, 1, std::numeric_limits<double>::infinity(),
             -std::numeric_limits<double>::infinity(), 1e-300, 0.5, 7000, 8000});
  OomReport oom_report;
  Stamp({Phase::kForward, 2, 0, 1}, &oom_report);
  oom_report.requested_bytes = int64_t{1} << 33;
  oom_report.free_bytes = 123;
  oom_report.message = "CUDA out of memory. Tried to allocate 8.00 GiB";
  oom_report.memory = Sample(5, true);
  sink.Oom(oom_report);
  SweepPointResult fitted;
  fitted.sweep_index = 0;
  fitted.value = 512;
  fitted.oom = false;
  fitted.anatomy = Anatomy(false);
  fitted.step_time_seconds = 0.5;
  fitted.tokens_per_second = 1024.0;
  fitted.final_loss = 9.75;
  fitted.mfu = 0.25;
  fitted.attention_backend = "sdpa";
  SweepPointResult oom;
  oom.sweep_index = 1;
  oom.value = 1024;
  oom.oom = true;
  oom.anatomy = Anatomy(true);
  fitted.steady_steps = 4;
  fitted.warmup_steps = 1;
  fitted.warmup_step_time_seconds = 3.25;
  sink.SweepPoint(fitted);
  FinalReport report;
  report.anatomy = Anatomy(true);
  report.sweep_points = {fitted, oom};
  report.largest_fitting_value = 512;
  report.parameter_count = 7615616512;
  report.attention_backend = "eager";
  report.device_name = "cpu";
  report.snapshot_written = true;
  report.sampler_overhead_ratio = 0.001;
  report.median_step_time_seconds = 1.5;
  report.tokens_per_second = 341.25;
  report.mfu = 0.4;
  report.final_loss = 11.875;
  report.steady_steps = 1;
  report.warmup_steps = 1;
  report.warmup_step_time_seconds = 0.75;
  sink.Report(report);
  sink.Report(FinalReport{});
  sink.Error({ErrorKind::kInvalidSpec, "training.seq_len: must be between 2 and 4194304, got 1",
              "training.seq_len"});
  sink.Error({ErrorKind::kInternal, "", ""});
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(EventStreamGoldenTest, EveryEventIsByteIdenticalToTheGoldenFile) {
  char path[] = "/tmp/vramlab-event-stream-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  {
    EventSink sink(fd);
    WriteEveryEvent(sink);
  }
  close(fd);
  const std::string written = ReadFile(path);
  std::remove(path);
  const std::string golden_path =
      std::string(VRAMLAB_SOURCE_DIR) + "/worker/events/testdata/event_stream.golden.jsonl";
  if (const char* out = std::getenv("VRAMLAB_WRITE_GOLDEN")) {
    std::ofstream(out, std::ios::binary) << written;
  }
  const std::string golden = ReadFile(golden_path);
  ASSERT_FALSE(golden.empty()) << golden_path;
  EXPECT_EQ(written, golden);
}

}  // namespace
}  // namespace vramlab::worker
