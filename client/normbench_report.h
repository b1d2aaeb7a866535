// normbench's report: what it was asked to run (Config), what one measured run found
// (RunResult), perf_analyzer's stability rule, and the run as JSON, as a CSV row and as a
// table on stdout.
// Plain values and stateless functions; the printers write to stdout unsynchronized.
#ifndef NORMD_CLIENT_NORMBENCH_REPORT_H_
#define NORMD_CLIENT_NORMBENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "normd/load/load_stats.h"

namespace normd {

// What normbench was asked to run, from its flags.
struct Config {
  std::string target;
  std::vector<double> levels;  // concurrency, or rate with `open`
  bool open = false;
  int64_t concurrency = 1;  // the open loop's in-flight cap
  bool poisson = false, stream = false, echo = false, compare = false, verify = false;
  std::optional<absl::Duration> duration;
  int64_t requests = -1;
  absl::Duration window = absl::Seconds(5);
  int max_windows = 10;
  absl::Duration warmup_time = absl::Seconds(1);
  int64_t warmup_requests = 0;
  uint64_t seed = 1;
  bool quiet = false;
};

// One measured run and what it found.
struct RunResult {
  double level = 0;
  bool echo = false;
  LoadStats stats;
  double elapsed_s = 0;
  std::vector<double> windows_rps;
  bool stable = false;
  int64_t steal_ms = -1;

  double rps() const { return elapsed_s > 0 ? stats.ok / elapsed_s : 0; }
  double gbps() const { return elapsed_s > 0 ? stats.bytes / elapsed_s / 1e9 : 0; }
};

// perf_analyzer's rule: the last three windows each within 10% of their mean.
bool Stable(const std::vector<double>& windows_rps);

// A run as the JSON object of the report's "runs" list.
std::string RunJson(const Config& c, const RunResult& r);
// The CSV header, and a run as one row under it.
extern const char kCsvHeader[];
std::string CsvRow(const Config& c, const RunResult& r);
// A run as a block of the terminal table; a sweep as one line per run.
void PrintRun(const Config& c, const RunResult& r);
void PrintSweep(const Config& c, const std::vector<RunResult>& runs);

}  // namespace normd

#endif  // NORMD_CLIENT_NORMBENCH_REPORT_H_
