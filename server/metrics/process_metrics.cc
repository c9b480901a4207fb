#include "server/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/metrics/metric_family_builder.h"

namespace vramlab::server {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::optional<double> OpenFileDescriptors() {
  std::error_code error;
  double count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++count;
  }
  if (error) return std::nullopt;
  return count - 1;  // the descriptor of the directory being listed
}

}  // namespace

std::optional<ProcStat> ParseProcStat(const std::string& content) {
  // "PID (COMM) STATE ...": COMM may hold anything, so the fields start after the last ')'.
  const size_t close = content.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(content).substr(close + 1), ' ', absl::SkipWhitespace());
  // fields[0] is field 3 (state), so field N is fields[N - 3].
  if (fields.size() < 22) return std::nullopt;
  ProcStat stat;
  if (!absl::SimpleAtoi(fields[14 - 3], &stat.utime_ticks) ||
      !absl::SimpleAtoi(fields[15 - 3], &stat.stime_ticks) ||
      !absl::SimpleAtoi(fields[22 - 3], &stat.start_time_ticks) ||
      !absl::SimpleAtoi(fields[23 - 3], &stat.virtual_bytes) ||
      !absl::SimpleAtoi(fields[24 - 3], &stat.resident_pages)) {
    return std::nullopt;
  }
  return stat;
}

std::optional<long long> ParseBootTime(const std::string& proc_stat) {
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n')) {
    if (!absl::ConsumePrefix(&line, "btime ")) continue;
    long long seconds = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &seconds)) return seconds;
  }
  return std::nullopt;
}

void CollectProcessMetrics(std::vector<MetricFamily>& out) {
  MetricFamily cpu =
      MakeFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                 MetricType::Counter);
  MetricFamily resident = MakeFamily("process_resident_memory_bytes",
                                     "Resident memory size in bytes.", MetricType::Gauge);
  MetricFamily virtual_memory = MakeFamily("process_virtual_memory_bytes",
                                           "Virtual memory size in bytes.", MetricType::Gauge);
  MetricFamily start =
      MakeFamily("process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.", MetricType::Gauge);
  MetricFamily open_fds =
      MakeFamily("process_open_fds", "Number of open file descriptors.", MetricType::Gauge);
  MetricFamily max_fds =
      MakeFamily("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge);

  const long ticks = sysconf(_SC_CLK_TCK);
  const long page_size = sysconf(_SC_PAGESIZE);
  const std::optional<ProcStat> stat = ParseProcStat(ReadFile("/proc/self/stat"));
  if (stat.has_value() && ticks > 0 && page_size > 0) {
    AddValue(cpu, {}, static_cast<double>(stat->utime_ticks + stat->stime_ticks) / ticks);
    AddValue(resident, {}, static_cast<double>(stat->resident_pages) * page_size);
    AddValue(virtual_memory, {}, static_cast<double>(stat->virtual_bytes));
    if (const auto boot = ParseBootTime(ReadFile("/proc/stat")); boot.has_value()) {
      AddValue(start, {},
               static_cast<double>(*boot) + static_cast<double>(stat->start_time_ticks) / ticks);
    }
  }
  if (const auto fds = OpenFileDescriptors(); fds.has_value()) AddValue(open_fds, {}, *fds);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    AddValue(max_fds, {}, static_cast<double>(limit.rlim_cur));
  }
  for (MetricFamily* family : {&cpu, &resident, &virtual_memory, &start, &open_fds, &max_fds}) {
    out.push_back(std::move(*family));
  }
}

}  // namespace vramlab::server
