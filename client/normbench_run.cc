#include "normbench_run.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "normd/common/machine_steal.h"

namespace normd {

RunResult Bench::Run(double level, bool echo) {
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
  // Closes the window that began at window_start: its throughput of OK answers.
  const auto close_window = [&](absl::Time now) {
    int64_t ok = 0;
    recorder.Peek([&](const LoadStats& s, absl::Time) { ok = s.ok; });
    r.windows_rps.push_back((ok - window_ok) / absl::ToDoubleSeconds(now - window_start));
    window_ok = ok;
    window_start = now;
  };
  for (;;) {
    absl::SleepFor(absl::Milliseconds(20));
    const absl::Time now = absl::Now();
    if (now - window_start >= window) close_window(now);
    if (progress_ && now >= next_progress) {
      Progress(recorder, level, echo, now - start);
      next_progress += absl::Seconds(1);
    }
    if (done_.load()) break;  // --requests reached
    // The open loop ends by its schedule (above); the closed loop here.
    if (config_.duration && now - start >= *config_.duration && !config_.open) {
      // The last third ends with the run, up to a tick of this loop.
      if (now - window_start >= window * 0.9) close_window(now);
      break;
    }
    if (!config_.duration && config_.requests < 0 &&
        (Stable(r.windows_rps) || static_cast<int>(r.windows_rps.size()) >= config_.max_windows)) {
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

bool Bench::Measuring(const LoadRecorder& recorder) {
  bool measuring = false;
  recorder.Peek([&](const LoadStats& s, absl::Time) { measuring = s.sent > 0; });
  return measuring;
}

void Bench::Progress(const LoadRecorder& recorder, double level, bool echo, absl::Duration t) {
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

}  // namespace normd
