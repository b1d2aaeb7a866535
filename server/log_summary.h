// The periodic summary line: every interval, at info, what was served since the last one
// (requests, of them OK, message bytes in and out) and the queue depth and requests in
// flight now.
//
// Thread safety: the constructor starts a thread of its own; the destructor stops and
// joins it.
#ifndef NORMD_SERVER_LOG_SUMMARY_H_
#define NORMD_SERVER_LOG_SUMMARY_H_

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/metrics/metrics.h"

namespace normd::server {

class LogSummary {
 public:
  // REQUIRES: interval > 0; `metrics` and `gauges` outlive this object.
  LogSummary(absl::Duration interval, const metrics::Metrics* metrics,
             std::function<metrics::Gauges()> gauges);
  ~LogSummary();

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_LOG_SUMMARY_H_
