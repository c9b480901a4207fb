// Reports from a synthetic event history: the timeline arithmetic and each format's structure.
#include "client/report_formats.h"
#include "client/report_svg.h"
#include "client/timeline.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace vramlab::client {
namespace {

using ::testing::HasSubstr;
using namespace vramlab::v1;  // NOLINT

ExperimentEvent Sample(double t, int64_t allocated, Phase phase) {
  ExperimentEvent e;
  auto* s = e.mutable_worker_event()->mutable_sample();
  s->set_time_seconds(t);
  s->set_allocated_bytes(allocated);
  s->set_reserved_bytes(allocated + 1024);
  s->set_phase(phase);
  return e;
}

ExperimentEvent PhaseEdgeEvent(double t, Phase phase, PhaseEdge edge, int64_t allocated) {
  ExperimentEvent e;
  auto* p = e.mutable_worker_event()->mutable_phase();
  p->set_phase(phase);
  p->set_edge(edge);
  p->mutable_memory()->set_time_seconds(t);
  p->mutable_memory()->set_allocated_bytes(allocated);
  p->mutable_memory()->set_reserved_bytes(allocated + 1024);
  p->mutable_memory()->set_phase(phase);
  return e;
}

std::vector<ExperimentEvent> History() {
  return {PhaseEdgeEvent(0.0, FORWARD, BEGIN, 100 << 10),
          Sample(0.05, 300 << 10, FORWARD),
          PhaseEdgeEvent(0.1, FORWARD, END, 400 << 10),
          PhaseEdgeEvent(0.1, BACKWARD, BEGIN, 400 << 10),
          Sample(0.15, 900 << 10, BACKWARD),
          PhaseEdgeEvent(0.2, BACKWARD, END, 200 << 10),
          PhaseEdgeEvent(0.2, OPTIMIZER_STEP, BEGIN, 200 << 10)};  // cut short: no END
}

Experiment Finished() {
  Experiment e;
  e.set_id("exp-000001");
  e.set_state(Experiment::SUCCEEDED);
  e.mutable_spec()->set_name("a <b> & \"c\"");
  e.mutable_spec()->mutable_memory()->set_device_memory_limit_bytes(1 << 20);
  auto* a = e.mutable_report()->mutable_anatomy();
  a->set_weights_bytes(100 << 10);
  a->set_gradients_bytes(100 << 10);
  a->set_activations_bytes(700 << 10);
  a->set_peak_allocated_bytes(900 << 10);
  return e;
}

// `e` as the daemon received it, `at` seconds after the epoch.
ExperimentEvent ReceivedAt(ExperimentEvent e, double at) {
  e.mutable_time()->set_seconds(static_cast<int64_t>(at));
  e.mutable_time()->set_nanos(static_cast<int32_t>((at - static_cast<int64_t>(at)) * 1e9));
  return e;
}

ExperimentEvent Started() {
  ExperimentEvent e;
  e.mutable_worker_event()->mutable_started()->set_pid(1);
  return e;
}

// A sweep run one worker per point: each worker times its readings from its own start. The
// second worker started 5 s after the first by the daemon's clock (each reading arrives 10 to
// 30 ms after it is taken; the least delay counts), so on the timeline its readings and phases
// follow the first's by 5 s, and nothing of the two points interleaves.
TEST(TimelineTest, LaterWorkersOfARankFollowTheFirstOnItsClock) {
  std::vector<ExperimentEvent> events = {
      ReceivedAt(Started(), 1000.5),
      ReceivedAt(PhaseEdgeEvent(0.5, FORWARD, BEGIN, 100 << 10), 1000.51),
      ReceivedAt(Sample(0.7, 300 << 10, FORWARD), 1000.73),
      ReceivedAt(PhaseEdgeEvent(1.0, FORWARD, END, 200 << 10), 1001.02),
      ReceivedAt(Started(), 1005.2),
      ReceivedAt(PhaseEdgeEvent(0.2, FORWARD, BEGIN, 100 << 10), 1005.23),
      ReceivedAt(Sample(0.4, 500 << 10, FORWARD), 1005.41),
      ReceivedAt(PhaseEdgeEvent(0.6, FORWARD, END, 100 << 10), 1005.62)};
  for (int i : {5, 7}) events[i].mutable_worker_event()->mutable_phase()->set_sweep_index(1);
  const std::vector<double> shifts = WorkerClockShifts(events);
  ASSERT_EQ(shifts.size(), events.size());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(shifts[i], 0.0) << i;
  for (int i = 5; i < 8; ++i) EXPECT_NEAR(shifts[i], 5.0, 1e-6) << i;

  const Timeline timeline = BuildTimeline(events);
  ASSERT_EQ(timeline.samples.size(), 6u);
  const std::vector<double> want = {0.5, 0.7, 1.0, 5.2, 5.4, 5.6};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(timeline.samples[i].time_seconds(), want[i], 1e-6) << i;
  }
  ASSERT_EQ(timeline.bands.size(), 2u);
  EXPECT_NEAR(timeline.bands[1].start_seconds, 5.2, 1e-6);
  EXPECT_EQ(timeline.bands[1].sweep_index, 1);
  EXPECT_EQ(timeline.samples[timeline.peak_index].allocated_bytes(), 500 << 10);

  // Without receipt times nothing moves.
  for (ExperimentEvent& e : events) e.clear_time();
  for (double shift : WorkerClockShifts(events)) EXPECT_EQ(shift, 0.0);
}

TEST(TimelineTest, SamplesInTimeOrderBandsPairedAndPeakFound) {
  const Timeline timeline = BuildTimeline(History());
  ASSERT_EQ(timeline.samples.size(), 7u);
  EXPECT_EQ(timeline.peak_index, 4);
  EXPECT_EQ(timeline.samples[timeline.peak_index].allocated_bytes(), 900 << 10);
  ASSERT_EQ(timeline.bands.size(), 3u);
  EXPECT_EQ(timeline.bands[0].phase, FORWARD);
  EXPECT_DOUBLE_EQ(timeline.bands[1].end_seconds, 0.2);
  EXPECT_EQ(timeline.bands[2].phase, OPTIMIZER_STEP);  // open phase ends at the last reading
  EXPECT_DOUBLE_EQ(timeline.end_seconds, 0.2);
}

TEST(TimelineTest, DownsampleKeepsThePeak) {
  std::vector<MemorySample> samples;
  for (int i = 0; i < 10000; ++i) {
    MemorySample s;
    s.set_time_seconds(i * 0.01);
    s.set_allocated_bytes(i == 7777 ? 1 << 30 : i);
    samples.push_back(s);
  }
  const auto thin = Downsample(samples, 100);
  EXPECT_LE(thin.size(), 200u);
  int64_t max = 0;
  for (const auto& s : thin) max = std::max(max, s.allocated_bytes());
  EXPECT_EQ(max, 1 << 30);
}

TEST(ReportSvgTest, NamedSeriesBandsPeakLimitAndAnatomyBarWithEscapedText) {
  const std::string svg = RenderSvg(Finished(), BuildTimeline(History()));
  EXPECT_THAT(svg, ::testing::StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(
      svg,
      HasSubstr(
          "id=\"series-allocated\" class=\"series\" data-series=\"allocated\" data-points=\"7\""));
  EXPECT_THAT(svg, HasSubstr("id=\"series-reserved\""));
  EXPECT_THAT(svg, HasSubstr("class=\"phase-band\" data-phase=\"backward\""));
  EXPECT_THAT(svg, HasSubstr("<circle id=\"peak-marker\" data-bytes=\"921600\""));
  EXPECT_THAT(svg, HasSubstr("id=\"limit-line\" data-bytes=\"1048576\""));
  EXPECT_THAT(svg, HasSubstr("data-category=\"activations\" data-bytes=\"716800\""));
  EXPECT_THAT(svg, HasSubstr("a &lt;b&gt; &amp; &quot;c&quot;"));
  EXPECT_THAT(svg, ::testing::Not(HasSubstr("<b>")));
  EXPECT_THAT(svg, ::testing::EndsWith("</svg>\n"));
}

TEST(ReportSvgTest, AnOomRunMarksTheRefusedRequestAndLongTitlesAreCut) {
  Experiment e;
  e.set_id("exp-000002");
  e.set_state(Experiment::OOM);
  e.mutable_spec()->set_name(std::string(300, 'n'));
  auto* oom = e.mutable_oom();
  oom->set_phase(BACKWARD);
  oom->set_requested_bytes(200 << 10);
  oom->mutable_memory()->set_time_seconds(0.15);
  oom->mutable_memory()->set_allocated_bytes(800 << 10);
  const std::string svg = RenderSvg(e, BuildTimeline(History()));
  EXPECT_THAT(svg, HasSubstr("<g id=\"oom-request\" data-requested-bytes=\"204800\" "
                             "data-allocated-bytes=\"819200\">"));
  EXPECT_THAT(svg, HasSubstr("OOM: request of 200.00 KiB refused"));
  // The drawn title is cut to the chart's width; the tooltip keeps it whole.
  const size_t title = svg.find("<text id=\"title\"");
  ASSERT_NE(title, std::string::npos);
  const std::string drawn = svg.substr(title, svg.find("</text>", title) - title);
  EXPECT_THAT(drawn, HasSubstr("..."));
  // At 17 px bold an "n" is 12.1 px wide: at most 70 of them fit the 850 px the title has.
  EXPECT_LE(std::count(drawn.begin(), drawn.end(), 'n'), 70);
  EXPECT_GT(std::count(drawn.begin(), drawn.end(), 'n'), 50);
  EXPECT_THAT(svg, HasSubstr("<title>exp-000002  " + std::string(300, 'n')));
  EXPECT_THAT(
      svg, ::testing::ContainsRegex(
               "<text id=\"outcome\" x=\"90.0\" y=\"42.0\" font-size=\"12\"[^>]*>OOM in backward"));
}

TEST(ReportSvgTest, TheAnatomyBarSaysWhatItsTotalIs) {
  const std::string svg = RenderSvg(Finished(), BuildTimeline(History()));
  // The title and its detail are two lines, so that neither runs past the picture's edge.
  EXPECT_THAT(svg, ::testing::ContainsRegex(
                       "<text id=\"anatomy-title\"[^>]*>measured anatomy: 900.00 KiB</text>"));
  EXPECT_THAT(svg, ::testing::ContainsRegex(
                       "<text id=\"anatomy-detail\"[^>]*>the sum of each category&apos;s "
                       "maximum; peak allocated 900.00 KiB"));
}

// A report with its peak moments, and readings that carry the live categories.
Experiment FinishedWithPeakMoments() {
  Experiment e = Finished();
  auto* a = e.mutable_report()->mutable_anatomy();
  auto* moment = a->mutable_at_peak_allocated();
  moment->set_allocated_bytes(900 << 10);
  moment->set_phase(BACKWARD);
  moment->mutable_categories()->set_weights_bytes(100 << 10);
  moment->mutable_categories()->set_gradients_bytes(50 << 10);
  moment->mutable_categories()->set_activations_bytes(600 << 10);
  moment->mutable_categories()->set_temporaries_bytes(150 << 10);
  auto* reserved = a->mutable_at_peak_reserved();
  reserved->set_reserved_bytes(1000 << 10);
  reserved->set_allocated_bytes(800 << 10);
  reserved->set_allocator_cache_bytes(200 << 10);
  reserved->set_phase(BACKWARD);
  a->set_peak_reserved_bytes(1000 << 10);
  return e;
}

std::vector<ExperimentEvent> HistoryWithCategories() {
  std::vector<ExperimentEvent> events = History();
  for (auto& e : events) {
    auto* s = e.worker_event().has_sample()
                  ? e.mutable_worker_event()->mutable_sample()
                  : e.mutable_worker_event()->mutable_phase()->mutable_memory();
    s->mutable_categories()->set_weights_bytes(100 << 10);
    s->mutable_categories()->set_temporaries_bytes(s->allocated_bytes() - (100 << 10));
  }
  return events;
}

TEST(ReportSvgTest, TheBarIsThePeakMomentAndTheCategoriesAreStackedOverTime) {
  const std::string svg =
      RenderSvg(FinishedWithPeakMoments(), BuildTimeline(HistoryWithCategories()));
  EXPECT_THAT(
      svg, HasSubstr("<g id=\"anatomy-bar\" data-kind=\"at-peak\" data-total-bytes=\"921600\">"));
  EXPECT_THAT(svg, HasSubstr("data-category=\"activations\" data-bytes=\"614400\""));
  EXPECT_THAT(svg, HasSubstr("data-category=\"temporary_buffers\" data-bytes=\"153600\""));
  EXPECT_THAT(svg, HasSubstr("cache at peak reserved 200.00 KiB"));
  EXPECT_THAT(svg, HasSubstr("<polygon class=\"category-area\" data-category=\"weights\""));
  EXPECT_THAT(svg,
              HasSubstr("<polygon class=\"category-area\" data-category=\"temporary_buffers\""));
  EXPECT_THAT(svg,
              ::testing::Not(HasSubstr("data-category=\"gradients\" fill")));  // none over time
}

TEST(ReportFormatsTest, TheAnatomyTableHasTheMomentAndTheMaximaAsTwoColumns) {
  const std::string text = RenderTextReport(FinishedWithPeakMoments(), BuildTimeline(History()));
  EXPECT_THAT(text, HasSubstr("at peak allocated"));
  EXPECT_THAT(text, HasSubstr("max over run"));
  EXPECT_THAT(text, ::testing::ContainsRegex("activations +600.00 KiB +700.00 KiB"));
  EXPECT_THAT(text, ::testing::ContainsRegex("allocator cache +200.00 KiB +0 B"));
  EXPECT_THAT(text, ::testing::ContainsRegex("peak allocated +900.00 KiB +900.00 KiB"));
  EXPECT_THAT(text, HasSubstr(" reserved = 800.00 KiB allocated + 200.00 KiB cache."));
  const std::string html = RenderHtmlReport(FinishedWithPeakMoments(), BuildTimeline(History()));
  EXPECT_THAT(html, HasSubstr("<th>at peak allocated</th><th>max over run</th>"));
}

TEST(ReportFormatsTest, CsvHasAHeaderAndARowPerReading) {
  const std::string csv = RenderCsvReport(BuildTimeline(History()));
  EXPECT_THAT(csv, ::testing::StartsWith("time_seconds,allocated_bytes,reserved_bytes,"));
  EXPECT_THAT(csv, HasSubstr("\n0.150000,921600,922624,0,0,0.000000,BACKWARD,0,0,0\n"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 8);
}

TEST(ReportFormatsTest, JsonIsProtobufJson) {
  const std::string json = RenderJsonReport(Finished(), BuildTimeline(History()));
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  EXPECT_EQ(parsed.fields().at("samples").list_value().values_size(), 7);
  EXPECT_EQ(parsed.fields().at("phases").list_value().values_size(), 3);
  EXPECT_EQ(parsed.fields().at("peak").struct_value().fields().at("allocatedBytes").string_value(),
            "921600");
  EXPECT_EQ(parsed.fields().at("experiment").struct_value().fields().at("id").string_value(),
            "exp-000001");
}

TEST(ReportFormatsTest, TextChartMarksThePeakAndPhases) {
  const std::string text = RenderTextReport(Finished(), BuildTimeline(History()));
  EXPECT_THAT(
      text,
      HasSubstr("sampled peak: 900.00 KiB allocated at 0.150 s (backward, step 0), 7 readings"));
  EXPECT_THAT(
      text,
      HasSubstr("phase  FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBO"));
  EXPECT_THAT(text, HasSubstr("#"));
}

TEST(ReportFormatsTest, HtmlIsSelfContained) {
  const std::string html = RenderHtmlReport(Finished(), BuildTimeline(History()));
  EXPECT_THAT(html, ::testing::StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("Content-Security-Policy\" content=\"default-src 'none'"));
  EXPECT_THAT(html, HasSubstr("<svg xmlns="));
  EXPECT_THAT(html, ::testing::Not(HasSubstr("<script")));
  EXPECT_THAT(html, ::testing::Not(HasSubstr("src=\"http")));
  EXPECT_THAT(html, ::testing::Not(HasSubstr("href=\"http")));
}

}  // namespace
}  // namespace vramlab::client
