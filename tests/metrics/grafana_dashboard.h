// The PromQL that a Grafana dashboard runs, read from its JSON model, and Grafana's substitution of
// template variables into it, for tests that evaluate a shipped dashboard against a real
// Prometheus.
//
// What is collected: every panel target's `expr` (panels inside collapsed rows included), every
// annotation's `expr`, and every query variable, whose query must be label_values(SELECTOR, LABEL).
// Substitution follows Grafana's Prometheus data source: `$name`, `${name}` and `[[name]]`; a
// multi-value or include-All variable inside a regex matcher becomes its values regex-escaped and
// joined as `(a|b)`, or the variable's allValue when "All" is selected.
//
// Header-only because tests/ links each *_test.cc as its own binary; include from one .cc each.
#ifndef VRAMLAB_TESTS_METRICS_GRAFANA_DASHBOARD_H_
#define VRAMLAB_TESTS_METRICS_GRAFANA_DASHBOARD_H_

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vramlab::testing {

struct DashboardQuery {
  std::string panel_title;  // "" for an annotation
  std::string where;  // for messages: "FILE: panel TITLE, target A" or "FILE: annotation NAME"
  std::string expr;   // as written, variables unsubstituted
};

struct DashboardVariable {
  std::string name;
  std::string selector;   // label_values's first argument; may use variables defined before it
  std::string label;      // label_values's second argument
  std::string all_value;  // what "All" stands for; "" when Grafana would join every value
  bool multi_or_all = false;
};

struct Dashboard {
  std::string file;
  std::vector<DashboardQuery> queries;
  std::vector<DashboardVariable> variables;  // query variables, in the dashboard's order
};

namespace dashboard_internal {

inline void CollectPanels(const std::string& file, const nlohmann::json& panels,
                          std::vector<DashboardQuery>& out) {
  for (const auto& panel : panels) {
    const std::string title = panel.value("title", "");
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      if (!target.contains("expr")) continue;
      out.push_back(
          {title,
           absl::StrCat(file, ": panel \"", title, "\", target ", target.value("refId", "?")),
           target["expr"].get<std::string>()});
    }
    // A collapsed row carries its panels inside itself.
    CollectPanels(file, panel.value("panels", nlohmann::json::array()), out);
  }
}

}  // namespace dashboard_internal

// Every *.json file under `dir` (recursively) that is a dashboard model (has "panels"), sorted.
inline std::vector<std::string> DashboardFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    const nlohmann::json model = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (model.is_object() && model.contains("panels")) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

inline absl::StatusOr<Dashboard> LoadDashboard(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json model = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!model.is_object()) return absl::InvalidArgumentError(path + ": not a JSON object");
  Dashboard dashboard;
  dashboard.file = std::filesystem::path(path).filename().string();
  dashboard_internal::CollectPanels(dashboard.file, model.value("panels", nlohmann::json::array()),
                                    dashboard.queries);
  const nlohmann::json empty = nlohmann::json::object();
  for (const auto& annotation :
       model.value("annotations", empty).value("list", nlohmann::json::array())) {
    if (!annotation.contains("expr")) continue;
    dashboard.queries.push_back(
        {"", absl::StrCat(dashboard.file, ": annotation \"", annotation.value("name", ""), "\""),
         annotation["expr"].get<std::string>()});
  }
  static const std::regex kLabelValues(R"(^label_values\((.*),\s*(\w+)\)$)");
  for (const auto& variable :
       model.value("templating", empty).value("list", nlohmann::json::array())) {
    if (variable.value("type", "") != "query") continue;
    const std::string name = variable.value("name", "");
    const nlohmann::json& query = variable["query"];
    const std::string text =
        query.is_string() ? query.get<std::string>() : query.value("query", "");
    std::smatch m;
    if (!std::regex_match(text, m, kLabelValues)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": variable ", name, ": query \"", text,
                                                     "\" is not label_values(SELECTOR, LABEL)"));
    }
    dashboard.variables.push_back(
        {name, m[1].str(), m[2].str(), variable.value("allValue", ""),
         variable.value("multi", false) || variable.value("includeAll", false)});
  }
  return dashboard;
}

// Grafana's text for a multi-value or include-All variable's selected `values` in a regex
// matcher: each value with the regex's special characters escaped for a PromQL string (`.`
// becomes `\\.`), one value as itself, several as `(a|b)`.
inline std::string RegexSelection(const std::vector<std::string>& values) {
  static const std::regex kSpecial(R"([$^*+?.()|\\{}\[\]])");
  std::vector<std::string> escaped;
  for (const auto& v : values) escaped.push_back(std::regex_replace(v, kSpecial, R"(\\$&)"));
  if (escaped.size() == 1) return escaped[0];
  return absl::StrCat("(", absl::StrJoin(escaped, "|"), ")");
}

// Replaces `$name`, `${name}` and `[[name]]` with `values[name]`; an unknown variable or a
// `${name:format}` (not used by the shipped dashboards) is an error naming it.
inline absl::StatusOr<std::string> Interpolate(const std::string& expr,
                                               const std::map<std::string, std::string>& values) {
  static const std::regex kVariable(R"(\$\{(\w+)(:[^}]*)?\}|\[\[(\w+)(:[^\]]*)?\]\]|\$(\w+))");
  std::string out;
  auto last = expr.cbegin();
  for (std::sregex_iterator it(expr.begin(), expr.end(), kVariable), end; it != end; ++it) {
    const std::smatch& m = *it;
    if (m[2].matched || m[4].matched) {
      return absl::InvalidArgumentError(absl::StrCat("variable format not supported: ", m.str()));
    }
    const std::string name = m[1].matched ? m[1].str() : m[3].matched ? m[3].str() : m[5].str();
    const auto value = values.find(name);
    if (value == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no value for variable $", name, " in ", expr));
    }
    out.append(last, m[0].first);
    out += value->second;
    last = m[0].second;
  }
  out.append(last, expr.cend());
  return out;
}

}  // namespace vramlab::testing

#endif  // VRAMLAB_TESTS_METRICS_GRAFANA_DASHBOARD_H_
