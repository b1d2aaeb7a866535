#include "normbench_report.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace normd {

bool Stable(const std::vector<double>& w) {
  if (w.size() < 3) return false;
  const double mean = (w[w.size() - 1] + w[w.size() - 2] + w[w.size() - 3]) / 3;
  if (mean <= 0) return false;
  for (size_t i = w.size() - 3; i < w.size(); ++i) {
    if (std::fabs(w[i] - mean) > 0.1 * mean) return false;
  }
  return true;
}

std::string RunJson(const Config& c, const RunResult& r) {
  const LoadStats& s = r.stats;
  std::vector<std::string> codes, by_code, replicas, series;
  for (const auto& [code, h] : s.by_code) {
    codes.push_back(absl::StrCat("\"", code, "\": ", h.count()));
    by_code.push_back(absl::StrCat("\"", code, "\": ", LatencyJson(h)));
  }
  for (const auto& [peer, p] : s.by_peer) {
    replicas.push_back(
        absl::StrCat("\"", peer, "\": {\"ok\": ", p.ok, ", \"failed\": ", p.failed, "}"));
  }
  for (size_t i = 0; i < s.series.size(); ++i) {
    const auto& p = s.series[i];
    series.push_back(absl::StrCat("{\"second\": ", i, ", \"ok\": ", p.ok, ", \"failed\": ",
                                  p.failed, ", \"p50\": ", p.latency_us.Percentile(0.5),
                                  ", \"p99\": ", p.latency_us.Percentile(0.99), "}"));
  }
  return absl::StrCat(
      "{\"call\": \"", r.echo ? "echo" : "normalize", "\", \"loop\": \"",
      c.open ? "open" : "closed",
      "\", \"concurrency\": ", c.open ? c.concurrency : static_cast<int64_t>(r.level),
      ", \"rate\": ", c.open ? r.level : 0, ", \"stream\": ", c.stream ? "true" : "false",
      ", \"duration_s\": ", r.elapsed_s, ", \"requests_sent\": ", s.sent,
      ", \"requests_ok\": ", s.ok, ", \"requests_failed\": ", s.failed,
      ", \"requests_unanswered\": ", s.sent - s.ok - s.failed, ", \"wrong_id\": ", s.wrong_id,
      ", \"batched\": ", s.batched, ", \"retried_calls\": ", s.retried_calls,
      ", \"retried_attempts\": ", s.retried_attempts, ", \"verified\": ", s.verified,
      ", \"mismatched\": ", s.mismatched_calls, ", \"throughput_rps\": ", r.rps(),
      ", \"throughput_gbps\": ", r.gbps(), ", \"bytes\": ", s.bytes,
      ", \"latency_us\": ", LatencyJson(s.latency_us),
      ", \"send_late_us\": ", LatencyJson(s.send_late_us), ", \"status_codes\": {",
      absl::StrJoin(codes, ", "), "}, \"latency_us_by_code\": {", absl::StrJoin(by_code, ", "),
      "}, \"replicas\": {", absl::StrJoin(replicas, ", "), "}, \"windows_rps\": [",
      absl::StrJoin(r.windows_rps, ", "), "], \"stable\": ", r.stable ? "true" : "false",
      ", \"series\": [", absl::StrJoin(series, ", "), "], \"machine_steal_ms\": ", r.steal_ms, "}");
}

const char kCsvHeader[] =
    "call,loop,level,stream,duration_s,sent,ok,failed,retried_calls,retried_attempts,"
    "mismatched,throughput_rps,throughput_gbps,lat_min_us,lat_mean_us,lat_p50_us,lat_p90_us,"
    "lat_p95_us,lat_p99_us,lat_p999_us,lat_max_us,stable";

std::string CsvRow(const Config& c, const RunResult& r) {
  const LatencyHistogram& h = r.stats.latency_us;
  return absl::StrCat(r.echo ? "echo" : "normalize", ",", c.open ? "open" : "closed", ",", r.level,
                      ",", c.stream ? 1 : 0, ",", r.elapsed_s, ",", r.stats.sent, ",", r.stats.ok,
                      ",", r.stats.failed, ",", r.stats.retried_calls, ",",
                      r.stats.retried_attempts, ",", r.stats.mismatched_calls, ",", r.rps(), ",",
                      r.gbps(), ",", h.min(), ",", h.mean(), ",", h.Percentile(0.5), ",",
                      h.Percentile(0.9), ",", h.Percentile(0.95), ",", h.Percentile(0.99), ",",
                      h.Percentile(0.999), ",", h.max(), ",", r.stable ? 1 : 0);
}

void PrintRun(const Config& c, const RunResult& r) {
  const LoadStats& s = r.stats;
  const LatencyHistogram& h = s.latency_us;
  std::printf("\n%s, %s loop, %s %g, %s: %.1f s, %s\n", r.echo ? "Echo" : "Normalize",
              c.open ? "open" : "closed", c.open ? "rate" : "concurrency", r.level,
              c.stream ? "stream" : "unary", r.elapsed_s,
              r.stable ? "stable (last 3 windows within 10%)"
                       : "NOT stable (last 3 windows differ by more than 10%, or fewer than 3)");
  std::printf("  requests    %lld sent, %lld ok, %lld failed, %lld unanswered\n",
              static_cast<long long>(s.sent), static_cast<long long>(s.ok),
              static_cast<long long>(s.failed), static_cast<long long>(s.sent - s.answered()));
  std::printf("  retries     %lld calls answered after %lld retried attempts\n",
              static_cast<long long>(s.retried_calls), static_cast<long long>(s.retried_attempts));
  if (s.verified > 0 || c.verify) {
    std::printf("  verify      %lld answers checked, %lld wrong\n",
                static_cast<long long>(s.verified), static_cast<long long>(s.mismatched_calls));
  }
  if (s.wrong_id > 0) {
    std::printf("  WRONG ID    %lld answers carried another request's id\n",
                static_cast<long long>(s.wrong_id));
  }
  std::printf("  throughput  %.1f requests/s, %.3f GB/s (request and response bytes)\n", r.rps(),
              r.gbps());
  std::printf(
      "  latency us  min %lld  mean %.0f  p50 %lld  p90 %lld  p95 %lld  p99 %lld  "
      "p99.9 %lld  max %lld\n",
      static_cast<long long>(h.min()), h.mean(), static_cast<long long>(h.Percentile(0.5)),
      static_cast<long long>(h.Percentile(0.9)), static_cast<long long>(h.Percentile(0.95)),
      static_cast<long long>(h.Percentile(0.99)), static_cast<long long>(h.Percentile(0.999)),
      static_cast<long long>(h.max()));
  if (c.open) {
    std::printf("  send late   p50 %lld us, p99 %lld us (the generator's own delay)\n",
                static_cast<long long>(s.send_late_us.Percentile(0.5)),
                static_cast<long long>(s.send_late_us.Percentile(0.99)));
  }
  std::vector<std::string> codes;
  for (const auto& [code, hist] : s.by_code) codes.push_back(absl::StrCat(code, " ", hist.count()));
  std::printf("  status      %s\n", absl::StrJoin(codes, ", ").c_str());
  for (const auto& [peer, p] : s.by_peer) {
    std::printf("  replica     %-28s %lld ok, %lld failed\n",
                peer.empty() ? "(none)" : peer.c_str(), static_cast<long long>(p.ok),
                static_cast<long long>(p.failed));
  }
  if (!r.windows_rps.empty()) {
    std::vector<std::string> w;
    for (double x : r.windows_rps) w.push_back(absl::StrFormat("%.0f", x));
    std::printf("  windows     %s requests/s\n", absl::StrJoin(w, " ").c_str());
  }
}

void PrintSweep(const Config& c, const std::vector<RunResult>& runs) {
  std::printf("\n%-9s %-11s %10s %8s %8s %8s %8s %8s %8s %7s\n", "call",
              c.open ? "rate" : "concurrency", "req/s", "GB/s", "p50 us", "p90 us", "p99 us",
              "p99.9 us", "failed", "stable");
  for (const RunResult& r : runs) {
    const LatencyHistogram& h = r.stats.latency_us;
    std::printf(
        "%-9s %-11g %10.1f %8.3f %8lld %8lld %8lld %8lld %8lld %7s\n",
        r.echo ? "echo" : "normalize", r.level, r.rps(), r.gbps(),
        static_cast<long long>(h.Percentile(0.5)), static_cast<long long>(h.Percentile(0.9)),
        static_cast<long long>(h.Percentile(0.99)), static_cast<long long>(h.Percentile(0.999)),
        static_cast<long long>(r.stats.failed), r.stable ? "yes" : "no");
  }
}

}  // namespace normd
