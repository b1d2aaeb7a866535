// normbench: a load generator for normd, in the manner of ghz and perf_analyzer.
//
// What it sends: any op with its options, random inputs from --seed, or a weighted --mix
// of kinds (client/load/workload.h). How: closed loop (--concurrency callers, each with
// one request in flight; a sweep 1:256:x2 runs each level in turn) or open loop (--rate
// requests/s on a constant or Poisson schedule, latency from the intended send time), unary
// or --stream, over --connections channels to any gRPC target (round_robin over its
// addresses). How long: --duration, --requests, or by default measurement windows that
// repeat until the last three agree within 10% (--window, --max-windows), after --warmup.
// What it reports: counts, status codes, retried attempts, answers per replica, --verify
// mismatches against the local float64 reference, throughput in requests/s and GB/s,
// latency percentiles from a histogram within 1%, a per-second series; a table on stdout,
// a progress line on a terminal, --json and --csv files. --compare runs Normalize and Echo
// back to back on the same workload and prints the ratio.
//
// Exit status: 0 when every call succeeded (and verified), 1 otherwise, 2 for bad flags.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "credential_flags.h"
#include "normd/client.h"
#include "normd/common/cli_flags.h"
#include "normd/common/machine_steal.h"
#include "normd/common/process_tuning.h"
#include "normd/common/status_macros.h"
#include "normd/load/load_gen.h"
#include "normd/load/workload.h"

namespace normd {
namespace {

constexpr char kUsage[] =
    R"(usage: normbench [--target TARGET] [workload flags | --mix FILE] [load flags] [report flags]
target:
  --target T        any gRPC target (default localhost:50051); several addresses
                    (ipv4:A:P,B:P or dns:///name:port) are balanced round_robin
  --connections N   channels, each its own connection; calls take turns (default 1)
  --max-attempts N  attempts per call, 1 to 5: UNAVAILABLE is retried on the next address
                    with backoff (default 5; 1: never)
  --timeout-ms MS   deadline of each call (default 30000)
load:
  --concurrency C   closed loop: C callers, each with one request in flight; a sweep
                    A:B:xF (multiply) or A:B:+S (add) runs each level (default 1)
  --rate R          open loop: R requests/s in all (a sweep as above), at most
                    --concurrency in flight (unary) or --concurrency streams (--stream)
  --arrival constant|poisson   the open loop's gaps (default constant)
  --stream          NormalizeStream instead of unary calls
  --echo            Echo (the transport alone) instead of Normalize
  --compare         Normalize, then Echo, on the same workload: prints the ratio
  --duration D      measure for D (seconds, or 500ms, 2m)
  --requests N      measure N requests
  --window D        without --duration/--requests: windows of D (default 5s) repeat until
                    the last three throughputs agree within 10%, up to --max-windows (10)
  --warmup W        before measuring: W as a time (2s, 500ms) or a request count (100);
                    its answers are not counted (default 1s)
  --seed N          of the random inputs and of the --mix choice (default 1)
  --verify          check every answer against the local float64 reference
report:
  --json FILE --csv FILE   the report as JSON (every figure) or CSV (a row per run)
  --quiet           no table on stdout
)";

// A sweep: "16", "1:256:x2" or "10:50:+10".
absl::StatusOr<std::vector<double>> ParseLevels(const std::string& name, const std::string& v) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected N, A:B:xF or A:B:+S, got '", v, "'"));
  };
  std::vector<std::string> parts = absl::StrSplit(v, ':');
  double a, b, step;
  if (parts.size() == 1) {
    if (!absl::SimpleAtod(parts[0], &a) || !(a > 0)) return bad();
    return std::vector<double>{a};
  }
  if (parts.size() != 3 || parts[2].size() < 2 || !absl::SimpleAtod(parts[0], &a) ||
      !absl::SimpleAtod(parts[1], &b) || !absl::SimpleAtod(parts[2].substr(1), &step) || !(a > 0) ||
      !(b >= a)) {
    return bad();
  }
  std::vector<double> levels;
  if (parts[2][0] == 'x' && step > 1) {
    for (double l = a; l <= b * (1 + 1e-9); l *= step) levels.push_back(l);
  } else if (parts[2][0] == '+' && step > 0) {
    for (double l = a; l <= b * (1 + 1e-9); l += step) levels.push_back(l);
  } else {
    return bad();
  }
  if (levels.size() > 64) return bad();
  return levels;
}

// "10" (seconds), "10s", "500ms", "2m".
absl::StatusOr<absl::Duration> ParseTime(const std::string& name, const std::string& v) {
  double seconds;
  absl::Duration d;
  if (absl::SimpleAtod(v, &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(v, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected a time (10, 10s, 500ms), got '", v, "'"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be > 0, got '", v, "'"));
  }
  return d;
}

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
  std::string workload_label;
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
bool Stable(const std::vector<double>& w) {
  if (w.size() < 3) return false;
  const double mean = (w[w.size() - 1] + w[w.size() - 2] + w[w.size() - 3]) / 3;
  if (mean <= 0) return false;
  for (size_t i = w.size() - 3; i < w.size(); ++i) {
    if (std::fabs(w[i] - mean) > 0.1 * mean) return false;
  }
  return true;
}

class Bench {
 public:
  Bench(Config config, Workload workload, std::vector<std::unique_ptr<Client>> clients)
      : config_(std::move(config)), workload_(std::move(workload)), owned_(std::move(clients)) {
    for (auto& c : owned_) clients_.push_back(c.get());
    progress_ = isatty(STDERR_FILENO) != 0;
  }

  RunResult Run(double level, bool echo) {
    LoadRecorder recorder(config_.verify && !echo);
    std::atomic<bool> stop{false};
    const int64_t warmup_n = config_.warmup_requests;
    recorder.set_limit(config_.requests);
    // A warmup by count begins the measurement at exactly that send; by time, here.
    if (warmup_n > 0 || config_.warmup_time == absl::ZeroDuration()) {
      recorder.BeginMeasurementAfter(warmup_n);
    }
    done_.store(false);
    std::thread generator([&] {
      if (config_.open) {
        OpenLoopOptions o;
        o.rate = level;
        o.poisson = config_.poisson;
        o.seed = config_.seed;
        o.start = absl::Now();
        // With --duration the schedule itself ends the run: every request due before the
        // end is sent, however late (the count is rate x duration, not what a timer caught).
        if (config_.duration) o.end = o.start + config_.warmup_time + *config_.duration;
        o.stop = &stop;
        o.max_in_flight = config_.concurrency;
        o.echo = echo;
        o.stream = config_.stream;
        OpenLoop(clients_, workload_, &recorder, o);
      } else {
        ClosedLoopOptions o;
        o.callers = static_cast<int64_t>(level);
        o.stop = &stop;
        o.stream = config_.stream;
        o.echo = echo;
        ClosedLoop(clients_, workload_, &recorder, o);
      }
      done_.store(true);
    });
    // Warmup: by count (the recorder begins at that send) or by time.
    if (warmup_n > 0) {
      while (!done_.load() && !Measuring(recorder)) absl::SleepFor(absl::Milliseconds(2));
    } else if (config_.warmup_time > absl::ZeroDuration()) {
      absl::SleepFor(config_.warmup_time);
      recorder.BeginMeasurement();
    }
    const std::optional<absl::Duration> steal_before = MachineStealTime();
    const absl::Time start = absl::Now();
    RunResult r;
    r.level = level;
    r.echo = echo;
    // Windows: fixed by --duration (thirds, at most --window each), or repeating.
    absl::Duration window = config_.window;
    if (config_.duration) window = std::min(window, *config_.duration / 3);
    int64_t window_ok = 0;
    absl::Time window_start = start, next_progress = start + absl::Seconds(1);
    for (;;) {
      absl::SleepFor(absl::Milliseconds(20));
      const absl::Time now = absl::Now();
      if (now - window_start >= window) {
        int64_t ok = 0;
        recorder.Peek([&](const LoadStats& s, absl::Time) { ok = s.ok; });
        r.windows_rps.push_back((ok - window_ok) / absl::ToDoubleSeconds(now - window_start));
        window_ok = ok;
        window_start = now;
      }
      if (progress_ && now >= next_progress) {
        Progress(recorder, level, echo, now - start);
        next_progress += absl::Seconds(1);
      }
      if (done_.load()) break;  // --requests reached
      // The open loop ends by its schedule (above); the closed loop here.
      if (config_.duration && now - start >= *config_.duration && (!config_.open || done_.load())) {
        // The last third ends with the run, up to a tick of this loop.
        if (now - window_start >= window * 0.9) {
          int64_t ok = 0;
          recorder.Peek([&](const LoadStats& s, absl::Time) { ok = s.ok; });
          r.windows_rps.push_back((ok - window_ok) / absl::ToDoubleSeconds(now - window_start));
        }
        break;
      }
      if (!config_.duration && config_.requests < 0 &&
          (Stable(r.windows_rps) ||
           static_cast<int>(r.windows_rps.size()) >= config_.max_windows)) {
        break;
      }
    }
    recorder.EndMeasurement();
    stop.store(true);
    generator.join();
    if (progress_) std::fprintf(stderr, "\r\033[K");
    r.elapsed_s = recorder.elapsed();
    r.stats = recorder.Take();
    r.stable = Stable(r.windows_rps);
    r.steal_ms = StealMs(steal_before, MachineStealTime());
    return r;
  }

  const Config& config() const { return config_; }
  const Workload& workload() const { return workload_; }

 private:
  static bool Measuring(const LoadRecorder& recorder) {
    bool measuring = false;
    recorder.Peek([&](const LoadStats& s, absl::Time) { measuring = s.sent > 0; });
    return measuring;
  }

  void Progress(const LoadRecorder& recorder, double level, bool echo, absl::Duration t) {
    std::string line;
    recorder.Peek([&](const LoadStats& s, absl::Time) {
      const LatencyHistogram* last = nullptr;
      int64_t last_ok = 0;
      if (s.series.size() >= 2) {
        last = &s.series[s.series.size() - 2].latency_us;  // the last whole second
        last_ok = s.series[s.series.size() - 2].ok;
      }
      line = absl::StrFormat("%s %s %g  %5.0fs  %8d ok %6d failed  %8d req/s  p50 %d us  p99 %d us",
                             echo ? "echo" : "normalize", config_.open ? "rate" : "concurrency",
                             level, absl::ToDoubleSeconds(t), s.ok, s.failed, last_ok,
                             last ? last->Percentile(0.5) : 0, last ? last->Percentile(0.99) : 0);
    });
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
  }

  Config config_;
  Workload workload_;
  std::vector<std::unique_ptr<Client>> owned_;
  std::vector<Client*> clients_;
  std::atomic<bool> done_{false};
  bool progress_ = false;
};

std::string Json(const Config& c, const RunResult& r) {
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

constexpr char kCsvHeader[] =
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

int Usage(const std::string& message) {
  std::fprintf(stderr, "normbench: %s\n(normbench --help lists the flags)\n", message.c_str());
  return 2;
}

int Main(const CliFlags& f) {
  if (!f.positional().empty()) return Usage(absl::StrCat("unexpected '", f.positional()[0], "'"));
  Config c;
  c.target = f.GetString("target", "localhost:50051");
  c.open = f.Has("rate");
  c.stream = f.GetBool("stream");
  c.echo = f.GetBool("echo");
  c.compare = f.GetBool("compare");
  c.verify = f.GetBool("verify");
  c.quiet = f.GetBool("quiet");
  if (c.compare && c.echo) return Usage("--compare runs Echo itself; leave out --echo");
  if (c.verify && c.echo) return Usage("--verify checks Normalize answers; leave out --echo");
  absl::StatusOr<std::vector<double>> levels =
      ParseLevels(c.open ? "rate" : "concurrency",
                  f.GetString(c.open ? "rate" : "concurrency", c.open ? "" : "1"));
  if (!levels.ok()) return Usage(std::string(levels.status().message()));
  c.levels = *levels;
  if (c.open) {
    absl::StatusOr<int64_t> cap = f.GetInt("concurrency", 64);
    if (!cap.ok() || *cap < 1 || *cap > 100000) {
      return Usage("--concurrency: with --rate, the cap of requests in flight, 1 to 100000");
    }
    c.concurrency = *cap;
  } else {
    for (double l : c.levels) {
      if (l != std::floor(l) || l > 100000)
        return Usage("--concurrency: whole numbers up to 100000");
    }
  }
  const std::string arrival = f.GetString("arrival", "constant");
  if (arrival != "constant" && arrival != "poisson") {
    return Usage(absl::StrCat("--arrival: expected constant or poisson, got '", arrival, "'"));
  }
  if (f.Has("arrival") && !c.open) return Usage("--arrival needs --rate (the open loop)");
  c.poisson = arrival == "poisson";
  if (f.Has("duration") && f.Has("requests"))
    return Usage("give --duration or --requests, not both");
  if (auto v = f.Find("duration")) {
    absl::StatusOr<absl::Duration> d = ParseTime("duration", *v);
    if (!d.ok()) return Usage(std::string(d.status().message()));
    c.duration = *d;
  }
  if (f.Has("requests")) {
    absl::StatusOr<int64_t> n = f.GetInt("requests", 0);
    if (!n.ok() || *n < 1) return Usage("--requests: expected a count >= 1");
    c.requests = *n;
  }
  if (auto v = f.Find("window")) {
    absl::StatusOr<absl::Duration> d = ParseTime("window", *v);
    if (!d.ok()) return Usage(std::string(d.status().message()));
    c.window = *d;
  }
  absl::StatusOr<int64_t> max_windows = f.GetInt("max-windows", 10);
  if (!max_windows.ok() || *max_windows < 3 || *max_windows > 1000) {
    return Usage("--max-windows: expected 3 to 1000");
  }
  c.max_windows = static_cast<int>(*max_windows);
  if (auto v = f.Find("warmup")) {
    int64_t count;
    if (absl::SimpleAtoi(*v, &count) && count >= 0) {
      c.warmup_requests = count;
      c.warmup_time = absl::ZeroDuration();
    } else if (absl::Duration d; absl::ParseDuration(*v, &d) && d >= absl::ZeroDuration()) {
      c.warmup_time = d;
    } else {
      return Usage(
          absl::StrCat("--warmup: expected a time (2s, 500ms) or a count (100), got '", *v, "'"));
    }
  }
  absl::StatusOr<int64_t> seed = f.GetInt("seed", 1);
  if (!seed.ok()) return Usage(std::string(seed.status().message()));
  c.seed = static_cast<uint64_t>(*seed);

  absl::StatusOr<Workload> workload = absl::InternalError("");
  if (auto mix = f.Find("mix")) {
    for (const auto& [name, boolean] : Workload::Flags()) {
      if (f.Has(name))
        return Usage(absl::StrCat("--mix describes the requests; leave out --", name));
    }
    std::ifstream in(*mix);
    if (!in.good()) return Usage(absl::StrCat("--mix: cannot read '", *mix, "'"));
    std::stringstream text;
    text << in.rdbuf();
    workload = Workload::FromMix(text.str(), c.seed);
  } else {
    workload = Workload::FromFlags(f, c.seed);
  }
  if (!workload.ok()) return Usage(std::string(workload.status().message()));
  if (c.verify) {
    if (absl::Status s = workload->ComputeReferences(); !s.ok())
      return Usage(std::string(s.message()));
  }

  ClientOptions options;
  absl::StatusOr<int64_t> timeout_ms = f.GetInt("timeout-ms", 30000);
  absl::StatusOr<int64_t> connections = f.GetInt("connections", 1);
  absl::StatusOr<int64_t> max_attempts = f.GetInt("max-attempts", options.retry.max_attempts);
  if (!timeout_ms.ok() || *timeout_ms < 1) return Usage("--timeout-ms: expected >= 1");
  if (!connections.ok() || *connections < 1 || *connections > 1024) {
    return Usage("--connections: expected 1 to 1024");
  }
  if (!max_attempts.ok() || *max_attempts < 1 || *max_attempts > 5) {
    return Usage(
        absl::StrCat("--max-attempts: expected 1 to 5, got '", f.GetString("max-attempts"), "'"));
  }
  options.timeout = absl::Milliseconds(*timeout_ms);
  options.own_connection = true;
  options.channels = static_cast<int>(*connections);
  options.retry.max_attempts = static_cast<int>(*max_attempts);
  ApplyCredentialFlags(f, &options);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(c.target, options);
  if (!client.ok()) return Usage(std::string(client.status().message()));
  std::vector<std::unique_ptr<Client>> clients;
  clients.push_back(*std::move(client));

  std::vector<std::string> labels;
  for (const WorkItem& item : workload->items()) {
    labels.push_back(workload->items().size() == 1 ? item.label
                                                   : absl::StrCat(item.weight, "x ", item.label));
  }
  if (!c.quiet) {
    std::printf("normbench %s -> %s: %s\n", NORMD_VERSION_STRING, c.target.c_str(),
                absl::StrJoin(labels, "; ").c_str());
  }
  Bench bench(c, *std::move(workload), std::move(clients));
  std::vector<RunResult> runs;
  for (double level : c.levels) {
    for (bool echo : c.compare ? std::vector<bool>{false, true} : std::vector<bool>{c.echo}) {
      runs.push_back(bench.Run(level, echo));
      if (!c.quiet) PrintRun(c, runs.back());
    }
  }
  std::vector<std::string> ratios;
  if (c.compare) {
    for (size_t i = 0; i + 1 < runs.size(); i += 2) {
      const double rps = runs[i + 1].rps() > 0 ? runs[i].rps() / runs[i + 1].rps() : 0;
      const int64_t echo_p50 = runs[i + 1].stats.latency_us.Percentile(0.5);
      const double p50 =
          echo_p50 > 0 ? static_cast<double>(runs[i].stats.latency_us.Percentile(0.5)) / echo_p50
                       : 0;
      std::printf("\nNormalize/Echo at %s %g: throughput %.2fx, p50 latency %.2fx\n",
                  c.open ? "rate" : "concurrency", runs[i].level, rps, p50);
      ratios.push_back(absl::StrCat("{\"level\": ", runs[i].level, ", \"throughput_ratio\": ", rps,
                                    ", \"p50_ratio\": ", p50, "}"));
    }
  }
  if (!c.quiet && runs.size() > 1) PrintSweep(c, runs);
  std::fflush(stdout);
  if (auto path = f.Find("json")) {
    std::vector<std::string> items;
    for (const WorkItem& item : bench.workload().items()) {
      items.push_back(
          absl::StrCat("{\"kind\": \"", item.label, "\", \"weight\": ", item.weight, "}"));
    }
    std::vector<std::string> rs;
    for (const RunResult& r : runs) rs.push_back(Json(c, r));
    std::ofstream(*path) << "{\"normbench\": \"" << NORMD_VERSION_STRING << "\", \"target\": \""
                         << c.target << "\", \"workload\": [" << absl::StrJoin(items, ", ")
                         << "], \"runs\": [" << absl::StrJoin(rs, ", ") << "], \"compare\": ["
                         << absl::StrJoin(ratios, ", ") << "]}\n";
  }
  if (auto path = f.Find("csv")) {
    std::ofstream out(*path);
    out << kCsvHeader << "\n";
    for (const RunResult& r : runs) out << CsvRow(c, r) << "\n";
  }
  bool good = true;
  for (const RunResult& r : runs) {
    good = good && r.stats.failed == 0 && r.stats.wrong_id == 0 && r.stats.mismatched_calls == 0 &&
           r.stats.sent == r.stats.answered();
  }
  return good ? 0 : 1;
}

}  // namespace
}  // namespace normd

int main(int argc, char** argv) {
  std::map<std::string, bool> known = {
      {"target", false},     {"connections", false}, {"max-attempts", false},
      {"timeout-ms", false}, {"concurrency", false}, {"rate", false},
      {"arrival", false},    {"stream", true},       {"echo", true},
      {"compare", true},     {"duration", false},    {"requests", false},
      {"window", false},     {"max-windows", false}, {"warmup", false},
      {"seed", false},       {"verify", true},       {"mix", false},
      {"json", false},       {"csv", false},         {"quiet", true},
      {"help", true}};
  for (const auto& [name, boolean] : normd::Workload::Flags()) known[name] = boolean;
  normd::AddCredentialFlags(&known);
  normd::CliFlags flags(known);
  const absl::Status parsed = flags.Parse(argc, argv);
  if (parsed.ok() && flags.GetBool("help")) {
    std::fputs(normd::kUsage, stdout);
    std::fputs(normd::Workload::FlagUsage(), stdout);
    std::fputs(normd::kCredentialUsage, stdout);
    return 0;
  }
  if (!parsed.ok()) return normd::Usage(std::string(parsed.message()));
  normd::TuneProcessForMessages();
  return normd::Main(flags);
}
