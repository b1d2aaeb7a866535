// The standard process_* metrics of Prometheus' client libraries, read from /proc at
// scrape time: process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds,
// process_start_time_seconds. Linux only; a value that cannot be read is left out.
//
// Stateless; safe from any thread.
#ifndef NORMD_SERVER_METRICS_PROCESS_METRICS_H_
#define NORMD_SERVER_METRICS_PROCESS_METRICS_H_

#include <string>

namespace normd::server::metrics {

void AppendProcessMetrics(std::string* out);

}  // namespace normd::server::metrics

#endif  // NORMD_SERVER_METRICS_PROCESS_METRICS_H_
