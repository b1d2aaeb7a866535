#include "server/log_summary.h"

#include "spdlog/spdlog.h"

namespace normd::server {

LogSummary::LogSummary(absl::Duration interval, const metrics::Metrics* metrics,
                       std::function<metrics::Gauges()> gauges) {
  thread_ = std::thread([this, interval, metrics, gauges = std::move(gauges)] {
    metrics::Metrics::Totals last = metrics->totals();
    while (!stop_.WaitForNotificationWithTimeout(interval)) {
      const metrics::Metrics::Totals now = metrics->totals();
      const metrics::Gauges g = gauges();
      spdlog::info(
          "last {}: {} requests ({} OK), {} bytes received, {} sent; queue depth {}, in flight "
          "{}",
          absl::FormatDuration(interval), now.requests - last.requests, now.ok - last.ok,
          now.received_bytes - last.received_bytes, now.sent_bytes - last.sent_bytes, g.queue_depth,
          g.in_flight);
      last = now;
    }
  });
}

LogSummary::~LogSummary() {
  stop_.Notify();
  thread_.join();
}

}  // namespace normd::server
