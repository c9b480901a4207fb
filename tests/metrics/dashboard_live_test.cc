// Every PromQL expression of every Grafana dashboard under deploy/ is evaluated on a real
// Prometheus (Debian's) that scrapes a real vramlabd every second while the real worker trains
// the tiny preset on the CPU. Each must return data, with the template variables set as Grafana
// sets them: once with "All" selected, once with the one daemon and the one slot selected. Then
// the daemon stops, and the panels meant to show its absence are checked for what they show.
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/metrics/grafana_dashboard.h"
#include "tests/metrics/prometheus_process.h"
#include "tests/support/daemon_harness.h"

namespace vramlab::testing {
namespace {

using vramlab::v1::Experiment;

// Grafana's built-in variables, as it sets them for a 5-minute time range with the provisioned
// data source (deploy/grafana/provisioning: timeInterval 5s, the deployed scrape interval):
// $__interval is at least timeInterval, $__rate_interval = max($__interval + 5s, 4 x 5s). The
// test's Prometheus scrapes every second, so each rate window holds about 20 samples.
const std::map<std::string, std::string> kBuiltins = {
    {"__interval", "5s"}, {"__rate_interval", "20s"}, {"__range", "5m"}};

// Panels whose value is known exactly while one experiment runs; every other expression must
// return at least one series with a finite value.
const std::map<std::string, double> kValueWhileRunning = {
    {"Daemon", 1},  // up x build_info: up, and one build
};
// The exceptions: panels that by design show data when there is no daemon to scrape, and the
// value they show then. Every other panel goes empty ("No data") once the daemon's series go stale.
const std::map<std::string, double> kValueWhenDown = {
    {"Daemon", 0},  // mapped to the text DOWN (falls back to up, then to vector(0))
};

// Selected: "All" for every variable, or each variable's first value (one daemon, one slot).
enum class Selection { kAll, kFirst };

class DashboardLiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonHarness::Start();
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    ASSERT_GT(daemon_->metrics_port(), 0) << daemon_->ReadLog();
    instance_ = absl::StrCat("127.0.0.1:", daemon_->metrics_port());
    auto prometheus = PrometheusProcess::Start(instance_);
    ASSERT_TRUE(prometheus.ok()) << prometheus.status();
    prometheus_ = *std::move(prometheus);
    for (const std::string& file : DashboardFiles(SourceDir() + "/deploy")) {
      auto dashboard = LoadDashboard(file);
      ASSERT_TRUE(dashboard.ok()) << dashboard.status();
      dashboards_.push_back(*std::move(dashboard));
    }
    ASSERT_FALSE(dashboards_.empty()) << "no dashboard JSON under deploy/";
  }

  // The value of every variable (built-ins included) under `selection`, each query variable's
  // values read from Prometheus as Grafana reads them (label_values of its selector).
  absl::StatusOr<std::map<std::string, std::string>> Variables(const Dashboard& dashboard,
                                                               Selection selection) const {
    std::map<std::string, std::string> values = kBuiltins;
    for (const DashboardVariable& variable : dashboard.variables) {
      auto selector = Interpolate(variable.selector, values);
      if (!selector.ok()) return selector.status();
      auto series = prometheus_->Query(*selector);
      if (!series.ok()) return series.status();
      std::set<std::string> options;
      for (const auto& s : *series) {
        if (s["metric"].contains(variable.label)) options.insert(s["metric"][variable.label]);
      }
      if (options.empty()) {
        return absl::NotFoundError(absl::StrCat(dashboard.file, ": variable $", variable.name,
                                                " has no values: ", *selector));
      }
      const std::vector<std::string> all(options.begin(), options.end());
      if (!variable.multi_or_all) {
        values[variable.name] = all[0];
      } else if (selection == Selection::kFirst) {
        values[variable.name] = RegexSelection({all[0]});
      } else {
        values[variable.name] =
            variable.all_value.empty() ? RegexSelection(all) : variable.all_value;
      }
    }
    return values;
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::string instance_;  // the `instance` label Prometheus gives the daemon's series
  std::unique_ptr<PrometheusProcess> prometheus_;
  std::vector<Dashboard> dashboards_;
};

TEST_F(DashboardLiveTest, EveryExpressionReturnsDataWhileAnExperimentRuns) {
  auto stub = daemon_->NewStub();
  // More steps than the checks need; the run is cancelled once they are done.
  vramlab::v1::ExperimentSpec spec = TinySpec(/*seq_len=*/64, /*steps=*/5000);
  spec.set_name("dashboard");
  auto submitted = Submit(*stub, spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto running = WaitForState(*stub, submitted->id(), Experiment::RUNNING);
  ASSERT_TRUE(running.ok()) << running.status() << daemon_->ReadLog();
  // Scraped while running, and the step counter moved between two scrapes inside the rate
  // window: range functions (rate, increase) need two samples of a series in their window.
  auto info = prometheus_->WaitForValue(
      absl::StrCat("vramlab_experiment_running_info{experiment=\"", running->id(), "\"}"),
      [](double v) { return v == 1; });
  ASSERT_TRUE(info.ok()) << info.status() << prometheus_->ReadLog();
  auto steps = prometheus_->WaitForValue(
      absl::StrCat("sum(rate(vramlab_step_duration_seconds_count[", kBuiltins.at("__rate_interval"),
                   "]))"),
      [](double v) { return v > 0; }, absl::Seconds(60));
  ASSERT_TRUE(steps.ok()) << steps.status();

  std::set<std::string> checked_titles;
  int evaluated = 0;
  for (const Dashboard& dashboard : dashboards_) {
    for (Selection selection : {Selection::kAll, Selection::kFirst}) {
      SCOPED_TRACE(selection == Selection::kAll ? "variables: All" : "variables: first value");
      auto variables = Variables(dashboard, selection);
      ASSERT_TRUE(variables.ok()) << variables.status();
      for (const DashboardQuery& query : dashboard.queries) {
        SCOPED_TRACE(query.where);
        auto expr = Interpolate(query.expr, *variables);
        ASSERT_TRUE(expr.ok()) << expr.status();
        auto result = prometheus_->Query(*expr);
        ASSERT_TRUE(result.ok()) << result.status();
        ++evaluated;
        EXPECT_FALSE(result->empty()) << "no data: " << *expr;
        bool finite = false;
        for (const auto& series : *result) {
          finite |= std::isfinite(std::stod(series["value"][1].get<std::string>()));
        }
        EXPECT_TRUE(finite) << *expr << " -> " << result->dump();
        const auto expected = kValueWhileRunning.find(query.panel_title);
        if (expected != kValueWhileRunning.end()) {
          checked_titles.insert(query.panel_title);
          ASSERT_EQ(result->size(), 1u) << *expr << " -> " << result->dump();
          EXPECT_EQ(std::stod((*result)[0]["value"][1].get<std::string>()), expected->second)
              << *expr;
        }
      }
    }
  }
  EXPECT_GE(evaluated, 2 * 22);  // vramlab.json: 21 panel targets and an annotation
  for (const auto& [title, value] : kValueWhileRunning) {
    EXPECT_TRUE(checked_titles.count(title)) << "no panel \"" << title << "\" in any dashboard";
  }
  ASSERT_TRUE(Cancel(*stub, running->id()).ok());
  ASSERT_TRUE(WaitForFinalState(*stub, running->id()).ok());

  // The daemon goes away: its scrape fails (up = 0), then the panels meant for that are checked
  // with the variables as they were (the daemon selected, or All), and with a daemon Prometheus
  // never scraped.
  std::vector<std::pair<const Dashboard*, std::map<std::string, std::string>>> selections;
  for (const Dashboard& dashboard : dashboards_) {
    for (Selection selection : {Selection::kAll, Selection::kFirst}) {
      auto variables = Variables(dashboard, selection);
      ASSERT_TRUE(variables.ok()) << variables.status();
      selections.emplace_back(&dashboard, *variables);
      auto never_scraped = *variables;
      never_scraped["instance"] = RegexSelection({"127.0.0.1:1"});
      selections.emplace_back(&dashboard, never_scraped);
    }
  }
  ASSERT_TRUE(daemon_->Stop().ok());
  auto down = prometheus_->WaitForValue(absl::StrCat("up{instance=\"", instance_, "\"}"),
                                        [](double v) { return v == 0; });
  ASSERT_TRUE(down.ok()) << down.status();
  checked_titles.clear();
  for (const auto& [dashboard, variables] : selections) {
    for (const DashboardQuery& query : dashboard->queries) {
      const auto expected = kValueWhenDown.find(query.panel_title);
      if (expected == kValueWhenDown.end()) continue;
      checked_titles.insert(query.panel_title);
      auto expr = Interpolate(query.expr, variables);
      ASSERT_TRUE(expr.ok()) << expr.status();
      auto value = prometheus_->ScalarQuery(*expr);
      ASSERT_TRUE(value.ok()) << value.status();
      ASSERT_TRUE(value->has_value()) << query.where << ": no data when down: " << *expr;
      EXPECT_EQ(**value, expected->second) << query.where << ": " << *expr;
    }
  }
  for (const auto& [title, value] : kValueWhenDown) {
    EXPECT_TRUE(checked_titles.count(title)) << "no panel \"" << title << "\" in any dashboard";
  }
}

}  // namespace
}  // namespace vramlab::testing
