// The standard process_* metrics of the Prometheus client libraries (CPU time, memory, file
// descriptors, start time) for the daemon itself, read from /proc/self on each scrape.
#ifndef VRAMLAB_SERVER_METRICS_PROCESS_METRICS_H_
#define VRAMLAB_SERVER_METRICS_PROCESS_METRICS_H_

#include <optional>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace vramlab::server {

// The fields of /proc/PID/stat the metrics use, in the kernel's units.
struct ProcStat {
  long long utime_ticks = 0;       // field 14
  long long stime_ticks = 0;       // field 15
  long long start_time_ticks = 0;  // field 22, since boot
  long long virtual_bytes = 0;     // field 23
  long long resident_pages = 0;    // field 24
};

// Parses the content of /proc/PID/stat (the command name may contain spaces and parentheses).
std::optional<ProcStat> ParseProcStat(const std::string& content);
// The "btime" line of /proc/stat: boot time in seconds since the epoch.
std::optional<long long> ParseBootTime(const std::string& proc_stat);

// Appends process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_start_time_seconds, process_open_fds and
// process_max_fds. A value that cannot be read is left out (its family stays, empty).
void CollectProcessMetrics(std::vector<prometheus::MetricFamily>& out);

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_METRICS_PROCESS_METRICS_H_
