// What a load run measured: answers by status code with their latency histograms, the
// answers per replica (the peer that answered), calls that succeeded only after retried
// attempts, answers that carried another request's id or failed verification, bytes
// moved, a per-second series, and the open loop's own send delays.
//
// Thread safety: LoadStats is a plain value, not safe for concurrent use; LoadRecorder
// (load_gen.h) guards one for the load generators.
#ifndef NORMD_LOAD_LOAD_STATS_H_
#define NORMD_LOAD_LOAD_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "normd/load/histogram.h"
#include "normd/v1/normd.pb.h"

namespace normd {

// One answered call, as the load generators report it.
struct Answer {
  absl::StatusCode code = absl::StatusCode::kOk;
  const v1::NormalizeResponse* response = nullptr;  // when one came
  std::string sent_id;
  int64_t latency_us = 0;
  double second = 0;          // when it was answered, in seconds since the stats' origin
  std::string peer;           // the replica that answered ("ipv4:127.0.0.1:5001"), or ""
  int previous_attempts = 0;  // attempts gRPC retried before this answer
  int64_t bytes = 0;          // tensor bytes sent and received
  int64_t mismatched = -1;  // --verify: output elements outside the accuracy rule; -1: not checked
};

struct LoadStats {
  struct PerSecond {
    int64_t ok = 0, failed = 0;
    LatencyHistogram latency_us;
  };
  struct PerPeer {
    int64_t ok = 0, failed = 0;
  };
  int64_t sent = 0, ok = 0, failed = 0;
  int64_t wrong_id = 0;  // answers carrying another request's id (must stay 0)
  int64_t batched = 0;   // answers whose server run was shared with other requests
  int64_t retried_calls = 0, retried_attempts = 0;  // calls answered after a retry; those retries
  int64_t verified = 0, mismatched_calls = 0;       // --verify
  int64_t bytes = 0;
  LatencyHistogram latency_us;                      // every answer
  std::map<std::string, LatencyHistogram> by_code;  // by status code name
  std::map<std::string, PerPeer> by_peer;           // "" for calls no replica answered
  std::vector<PerSecond> series;                    // by second since the origin
  // Open loop: how late each request left against its schedule (the generator's own
  // delay, included in its latency): when this is near the latency, the client is the
  // bottleneck, not the server.
  LatencyHistogram send_late_us;

  void Record(const Answer& a);
  void Merge(const LoadStats& other);
  int64_t answered() const { return ok + failed; }
};

// {"count": n, "min": .., "mean": .., "p50": .., "p90": .., "p95": .., "p99": ..,
//  "p99.9": .., "max": ..}
std::string LatencyJson(const LatencyHistogram& h);

}  // namespace normd

#endif  // NORMD_LOAD_LOAD_STATS_H_
