// What the transport records of every answered request: the metrics (metrics/metrics.h)
// and, when the access log is on, an access line (logging.h). Called once per request
// where the call answers it.
//
// Thread safety: safe from any thread (the metrics are lock-free, spdlog is thread-safe).
#ifndef NORMD_SERVER_REQUEST_LOG_H_
#define NORMD_SERVER_REQUEST_LOG_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "normd/scheduling/work.h"
#include "normd/v1/normd.pb.h"
#include "server/metrics/metrics.h"

namespace normd::server {

struct Answer {
  const v1::NormalizeRequest* request = nullptr;
  const v1::NormalizeResponse* response = nullptr;  // null or empty when it failed
  absl::Status status;
  const WorkResult* result = nullptr;  // set when a backend ran it
  absl::Time start;                    // when the request was received
  bool echo = false;
};

// Records `answer` in `metrics` (and the rejection reason of a request refused before
// compute), and writes its access line when the access log is on; `peer` is only asked
// for then.
void RecordAnswer(metrics::Metrics* metrics, const Answer& answer,
                  const std::function<std::string()>& peer);

}  // namespace normd::server

#endif  // NORMD_SERVER_REQUEST_LOG_H_
