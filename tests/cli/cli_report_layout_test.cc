// The SVG and HTML reports of a normal, an OOM, a sweep and a two-rank run, rendered by headless
// Chromium, whose every text box is measured (getBoundingClientRect, after text-anchor and font
// fallback): no two texts of a picture intersect and none leaves the picture.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/report_runs.h"
#include "tests/support/child_process.h"

namespace vramlab::cli_test {
namespace {

// The page's DOM after its scripts ran, or "" when Chromium fails (or takes over 120 s).
std::string DumpDom(const std::string& page, const std::string& profile) {
  const vramlab::testing::ChildResult ended = vramlab::testing::RunChild(
      {.argv = {"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--user-data-dir=" + profile, "--virtual-time-budget=5000",
                "--dump-dom", "file://" + page},
       .stderr_file = "/dev/null"},
      std::chrono::seconds(120));
  return ended.exit_code == 0 ? ended.out : "";
}

struct Measured {
  int svgs = 0;
  std::vector<int> texts;             // per SVG
  std::vector<std::string> problems;  // OVERLAP and OUTSIDE lines
};

// `markup` (an SVG or an HTML page) with tests/cli/text_boxes.js run over it in Chromium.
Measured Measure(const std::string& markup, const std::string& name) {
  const std::string script =
      ReadWholeFile(std::string(VRAMLAB_SOURCE_DIR) + "/tests/cli/text_boxes.js");
  std::string page;
  if (markup.rfind("<!DOCTYPE html>", 0) == 0) {
    // The report's own Content-Security-Policy forbids scripts: the measuring copy drops it.
    page = markup;
    const size_t csp = page.find("<meta http-equiv=\"Content-Security-Policy\"");
    if (csp != std::string::npos) page.erase(csp, page.find('>', csp) + 1 - csp);
    page.insert(page.rfind("</body>"), "<script>" + script + "</script>");
  } else {
    page = "<!DOCTYPE html><html><body style=\"margin:0\">" + markup.substr(markup.find("<svg")) +
           "<script>" + script + "</script></body></html>";
  }
  const std::string path = TempPath(name + "-measure.html");
  FILE* f = fopen(path.c_str(), "w");
  if (f != nullptr) {
    fwrite(page.data(), 1, page.size(), f);
    fclose(f);
  }
  const std::string dom = DumpDom(path, TempPath(name + "-profile"));
  Measured measured;
  const size_t start = dom.find("<pre id=\"text-boxes\">");
  if (start == std::string::npos) return measured;
  for (absl::string_view line :
       absl::StrSplit(dom.substr(start, dom.find("</pre>", start) - start), '\n')) {
    int count = 0;
    if (absl::ConsumePrefix(&line, "TEXTS ") && absl::SimpleAtoi(line, &count)) {
      ++measured.svgs;
      measured.texts.push_back(count);
    } else if (absl::StartsWith(line, "OVERLAP ") || absl::StartsWith(line, "OUTSIDE ")) {
      measured.problems.emplace_back(line);
    }
  }
  return measured;
}

class CliReportLayoutTest : public ReportRunsTest<CliReportLayoutTest> {};

TEST_F(CliReportLayoutTest, NoTwoTextsOfAnySvgReportIntersectAndNoneLeavesThePicture) {
  for (const auto& [kind, id] : ids_) {
    (void)id;
    SCOPED_TRACE(kind);
    const std::string svg = TempPath(kind + ".svg");
    const CliResult r = Report(kind, "svg", svg);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    const Measured measured = Measure(ReadWholeFile(svg), kind + "-svg");
    ASSERT_EQ(measured.svgs, 1) << "Chromium measured nothing in " << svg;
    // Title, outcome, settings, ticks, legends, the anatomy's title and entries, the peak label.
    EXPECT_GT(measured.texts[0], 20);
    EXPECT_THAT(measured.problems, ::testing::IsEmpty()) << svg;
    // Each labelled mark of the picture kept its label.
    const std::string text = ReadWholeFile(svg);
    EXPECT_THAT(text, ::testing::HasSubstr("id=\"peak-label\""));
    if (text.find("id=\"oom-request\"") != std::string::npos) {
      EXPECT_THAT(text, ::testing::HasSubstr("id=\"oom-label\""));
    }
    for (const char* line : {"limit-line", "predicted-peak-line"}) {
      if (text.find(absl::StrCat("<line id=\"", line, "\"")) != std::string::npos) {
        EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat("id=\"", line, "-label\""))) << line;
      }
    }
  }
}

TEST_F(CliReportLayoutTest, TheOomPictureLabelsTheRefusedRequestAndTheLimitApart) {
  const std::string svg = TempPath("oom-marks.svg");
  ASSERT_EQ(Report("oom", "svg", svg).exit_code, 0);
  const std::string text = ReadWholeFile(svg);
  // The picture that once drew "OOM: request ... refused" over "limit ...": both are there.
  EXPECT_THAT(text, ::testing::HasSubstr("id=\"oom-label\""));
  EXPECT_THAT(text, ::testing::HasSubstr("id=\"limit-line-label\""));
}

TEST_F(CliReportLayoutTest, TheHtmlPagesSvgHasNoIntersectingTextsEither) {
  for (const auto& [kind, id] : ids_) {
    (void)id;
    SCOPED_TRACE(kind);
    const std::string html = TempPath(kind + ".html");
    const CliResult r = Report(kind, "html", html);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    const Measured measured = Measure(ReadWholeFile(html), kind + "-html");
    ASSERT_EQ(measured.svgs, 1) << "Chromium measured nothing in " << html;
    EXPECT_GT(measured.texts[0], 20);
    EXPECT_THAT(measured.problems, ::testing::IsEmpty()) << html;
  }
}

}  // namespace
}  // namespace vramlab::cli_test
