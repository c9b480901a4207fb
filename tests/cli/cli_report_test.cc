// vramlab report in every format for a real CPU run: the SVG parsed as XML (xmllint) with the
// expected series, the HTML rendered by headless Chromium into a non-blank screenshot, CSV and
// JSON parsed, the text chart.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "tests/cli/cli_runner.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::cli_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Output of a command (stdout; stderr discarded), or "" when it fails.
std::string Capture(const std::vector<std::string>& argv) {
  const vramlab::testing::ChildResult ended =
      vramlab::testing::RunChild({.argv = argv, .stderr_file = "/dev/null"});
  return ended.exit_code == 0 ? ended.out : "";
}

std::string XPath(const std::string& file, const std::string& expression) {
  return std::string(absl::StripAsciiWhitespace(Capture({"xmllint", "--xpath", expression, file})));
}

class CliReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto daemon = vramlab::testing::DaemonHarness::Start({.enable_metrics = false});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    // Two optimizer steps of two micro-batches each: several phase bands of every kind.
    CliResult r = RunCli({"submit",
                          "--addr",
                          daemon_->address(),
                          "--preset",
                          "tiny",
                          "--dtype",
                          "fp32",
                          "--seq-len",
                          "64",
                          "--micro-batch",
                          "2",
                          "--accum",
                          "2",
                          "--steps",
                          "2",
                          "--sample-interval",
                          "1",
                          "--name",
                          "report <run>",
                          "--memory-limit",
                          "64MiB",
                          "--wait"});
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    id_ = new std::string(r.OutLines().at(0));
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete id_;
  }
  void SetUp() override { ASSERT_NE(id_, nullptr); }

  static CliResult Report(const std::string& format, const std::string& output) {
    std::vector<std::string> args = {"report",           *id_,       "--addr",
                                     daemon_->address(), "--format", format};
    if (!output.empty()) {
      args.push_back("-o");
      args.push_back(output);
    }
    return RunCli(args);
  }

  static vramlab::testing::DaemonHarness* daemon_;
  static std::string* id_;
};

vramlab::testing::DaemonHarness* CliReportTest::daemon_ = nullptr;
std::string* CliReportTest::id_ = nullptr;

TEST_F(CliReportTest, SvgIsWellFormedXmlWithTheExpectedSeries) {
  const std::string svg = TempPath("report.svg");
  CliResult r = Report("svg", svg);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("wrote svg report of " + *id_));
  ASSERT_EQ(vramlab::testing::RunChild({.argv = {"xmllint", "--noout", svg}}).exit_code, 0)
      << ReadWholeFile(svg);

  const auto node = [](const std::string& name, const std::string& predicate) {
    return "//*[local-name()='" + name + "' and " + predicate + "]";
  };
  for (const char* series : {"series-allocated", "series-reserved"}) {
    int points = 0;
    ASSERT_TRUE(absl::SimpleAtoi(
        XPath(svg,
              "string(" + node("polyline", std::string("@id='") + series + "'") + "/@data-points)"),
        &points))
        << series;
    EXPECT_GT(points, 10) << series;
    const std::string coordinates =
        XPath(svg, "string(" + node("polyline", std::string("@id='") + series + "'") + "/@points)");
    EXPECT_EQ(static_cast<int>(std::count(coordinates.begin(), coordinates.end(), ',')), points);
  }
  for (const char* phase : {"forward", "backward", "optimizer step"}) {
    int bands = 0;
    ASSERT_TRUE(absl::SimpleAtoi(
        XPath(svg,
              "count(" +
                  node("rect", std::string("@class='phase-band' and @data-phase='") + phase + "'") +
                  ")"),
        &bands));
    // 2 steps x 2 micro-steps of forward and backward; 2 optimizer steps.
    EXPECT_EQ(bands, std::string(phase) == "optimizer step" ? 2 : 4) << phase;
  }
  EXPECT_EQ(XPath(svg, "count(" + node("circle", "@id='peak-marker'") + ")"), "1");
  // The 64 MiB limit: a dashed line near the data, or a note when it is far above it.
  EXPECT_EQ(XPath(svg, "string(//*[@id='limit-line' or @id='limit-note']/@data-bytes)"),
            std::to_string(64 << 20));

  // The anatomy bar is the moment of peak allocated: its segments carry exactly the bytes `show
  // --json` reports for it, and they sum to that peak.
  CliResult show = RunCli({"show", *id_, "--addr", daemon_->address(), "--json"});
  vramlab::v1::Experiment experiment;
  ASSERT_TRUE(ParseJson(show.out, experiment));
  const auto& anatomy = experiment.report().anatomy();
  ASSERT_TRUE(anatomy.has_at_peak_allocated());
  const auto& at_peak = anatomy.at_peak_allocated().categories();
  EXPECT_EQ(XPath(svg, "string(" + node("g", "@id='anatomy-bar'") + "/@data-kind)"), "at-peak");
  int64_t segments = 0;
  for (const auto& [category, bytes] : std::vector<std::pair<std::string, int64_t>>{
           {"weights", at_peak.weights_bytes()},
           {"gradients", at_peak.gradients_bytes()},
           {"optimizer_state", at_peak.optimizer_state_bytes()},
           {"activations", at_peak.activations_bytes()},
           {"temporary_buffers", at_peak.temporaries_bytes()}}) {
    EXPECT_EQ(
        XPath(svg, "string(" + node("rect", "@data-category='" + category + "'") + "/@data-bytes)"),
        std::to_string(bytes))
        << category;
    segments += bytes;
  }
  EXPECT_EQ(segments, anatomy.at_peak_allocated().allocated_bytes());
  EXPECT_EQ(anatomy.at_peak_allocated().allocated_bytes(), anatomy.peak_allocated_bytes());
  // The categories over time: stacked areas, weights among them.
  EXPECT_EQ(
      XPath(svg, "count(" + node("polygon", "@class='category-area' and @data-category='weights'") +
                     ")"),
      "1");
  EXPECT_EQ(XPath(svg, "string(//*[local-name()='title'][1])"), *id_ + "  report <run>  SUCCEEDED");
}

TEST_F(CliReportTest, HtmlRendersInHeadlessChromiumToANonBlankScreenshot) {
  const std::string html = TempPath("report.html");
  CliResult r = Report("html", html);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::string page = ReadWholeFile(html);
  EXPECT_THAT(page, StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(page, HasSubstr("report &lt;run&gt;"));
  // Nothing to fetch: no scripts, links, external images or URLs but the SVG namespace.
  for (const char* fetch : {"<script", "<link", "src=", "href=", "url(", "https://"}) {
    EXPECT_THAT(page, ::testing::Not(HasSubstr(fetch))) << fetch;
  }
  const std::string png = TempPath("report.png");
  const std::string profile = TempPath("chromium-profile");
  const vramlab::testing::ChildResult chromium = vramlab::testing::RunChild(
      {.argv = {"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--user-data-dir=" + profile, "--screenshot=" + png,
                "--window-size=1200,900", "file://" + html},
       .stdout_file = "/dev/null",
       .stderr_with_stdout = true},
      std::chrono::seconds(120));
  ASSERT_EQ(chromium.exit_code, 0) << chromium.Describe();
  const std::string counted =
      Capture({"python3", std::string(VRAMLAB_SOURCE_DIR) + "/tests/cli/count_png_colors.py", png});
  std::vector<std::string> fields = absl::StrSplit(absl::StripAsciiWhitespace(counted), ' ');
  ASSERT_EQ(fields.size(), 3u) << counted;
  int colors = 0, width = 0, height = 0;
  ASSERT_TRUE(absl::SimpleAtoi(fields[0], &colors));
  ASSERT_TRUE(absl::SimpleAtoi(fields[1], &width));
  ASSERT_TRUE(absl::SimpleAtoi(fields[2], &height));
  EXPECT_EQ(width, 1200);
  EXPECT_EQ(height, 900);
  // A blank page has one color; text, two series, phase bands and the bar give many more.
  EXPECT_GT(colors, 20) << "screenshot " << png << " looks blank";
}

TEST_F(CliReportTest, CsvHasOneRowPerReadingInTimeOrder) {
  CliResult r = Report("csv", "");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  auto lines = r.OutLines();
  ASSERT_GT(lines.size(), 10u);
  EXPECT_EQ(lines[0],
            "time_seconds,allocated_bytes,reserved_bytes,active_bytes,peak_allocated_bytes,"
            "fragmentation_ratio,phase,step,micro_step,sweep_index");
  double previous = -1;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    ASSERT_EQ(cells.size(), 10u) << lines[i];
    double t = 0;
    ASSERT_TRUE(absl::SimpleAtod(cells[0], &t));
    EXPECT_GE(t, previous);
    previous = t;
  }
}

TEST_F(CliReportTest, JsonIsProtobufJsonWithSamplesPhasesAndPeak) {
  CliResult r = Report("json", "");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  google::protobuf::Struct report;
  ASSERT_TRUE(ParseJson(r.out, report));
  const auto& fields = report.fields();
  EXPECT_GT(fields.at("samples").list_value().values_size(), 10);
  EXPECT_EQ(fields.at("phases").list_value().values_size() > 0, true);
  // Each part parses as its proto type.
  std::string experiment_json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(fields.at("experiment").struct_value(),
                                                          &experiment_json)
                  .ok());
  vramlab::v1::Experiment experiment;
  ASSERT_TRUE(ParseJson(experiment_json, experiment));
  EXPECT_EQ(experiment.id(), *id_);
  std::string peak_json;
  ASSERT_TRUE(
      google::protobuf::util::MessageToJsonString(fields.at("peak").struct_value(), &peak_json)
          .ok());
  vramlab::v1::MemorySample peak;
  ASSERT_TRUE(ParseJson(peak_json, peak));
  EXPECT_GT(peak.allocated_bytes(), experiment.report().anatomy().weights_bytes());
  // --json means the same.
  CliResult same = RunCli({"report", *id_, "--addr", daemon_->address(), "--json"});
  EXPECT_EQ(same.out, r.out);
}

TEST_F(CliReportTest, TextChartAndRefusalForUnfinishedRuns) {
  CliResult text = Report("text", "");
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("sampled peak: "));
  EXPECT_THAT(text.out, HasSubstr("phase  "));
  EXPECT_THAT(text.out, HasSubstr("memory anatomy:"));

  CliResult queued = RunCli({"submit", "--addr", daemon_->address(), "--preset", "tiny", "--dtype",
                             "fp32", "--seq-len", "64", "--steps", "10000"});
  ASSERT_EQ(queued.exit_code, 0) << Describe(queued);
  const std::string running = queued.OutLines().at(0);
  CliResult refused = RunCli({"report", running, "--addr", daemon_->address()});
  EXPECT_EQ(refused.exit_code, 6) << Describe(refused);
  EXPECT_THAT(refused.err, StartsWith("vramlab: FAILED_PRECONDITION: " + running + " is "));
  EXPECT_EQ(RunCli({"cancel", running, "--addr", daemon_->address()}).exit_code, 0);

  CliResult unwritable = Report("svg", "/nonexistent-dir/report.svg");
  EXPECT_EQ(unwritable.exit_code, 2) << Describe(unwritable);
  EXPECT_THAT(unwritable.err,
              StartsWith("vramlab: INVALID_ARGUMENT: cannot write /nonexistent-dir/report.svg"));
}

}  // namespace
}  // namespace vramlab::cli_test
