#include "server/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace normd::server::metrics {
namespace {

void Gauge(std::string* out, const char* name, const char* type, const char* help, double v) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ", v,
                  "\n");
}

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Seconds since the epoch at which the machine booted (/proc/stat's btime), or -1.
double BootTime() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/stat"), '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      double t;
      if (absl::SimpleAtod(line, &t)) return t;
    }
  }
  return -1;
}

}  // namespace

void AppendProcessMetrics(std::string* out) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // /proc/self/stat: fields after the command name's closing parenthesis, starting at
  // field 3 (state); utime is field 14, stime 15, starttime 22, vsize 23, rss 24.
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos && paren + 2 < stat.size()) {
    const std::vector<absl::string_view> f =
        absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ');
    auto field = [&](int n) {
      double v = 0;
      return n - 3 < static_cast<int>(f.size()) && absl::SimpleAtod(f[n - 3], &v) ? v : -1.0;
    };
    const double utime = field(14), stime = field(15), start = field(22), vsize = field(23),
                 rss = field(24);
    if (utime >= 0 && stime >= 0) {
      Gauge(out, "process_cpu_seconds_total", "counter",
            "Total user and system CPU time spent in seconds.", (utime + stime) / ticks);
    }
    if (rss >= 0) {
      Gauge(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
            rss * page);
    }
    if (vsize >= 0) {
      Gauge(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize);
    }
    const double boot = BootTime();
    if (start >= 0 && boot >= 0) {
      Gauge(out, "process_start_time_seconds", "gauge",
            "Start time of the process since unix epoch in seconds.", boot + start / ticks);
    }
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    int n = 0;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(dir);
    // Less the descriptor opendir itself holds.
    Gauge(out, "process_open_fds", "gauge", "Number of open file descriptors.", n - 1);
  }
  rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    Gauge(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
          lim.rlim_cur == RLIM_INFINITY ? -1.0 : static_cast<double>(lim.rlim_cur));
  }
}

}  // namespace normd::server::metrics
