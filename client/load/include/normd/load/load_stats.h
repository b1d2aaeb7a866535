// What a load run measured: answers by status code with their latencies, ids checked,
// shared backend runs, and the open loop's own send delays; nearest-rank percentiles and
// their JSON summary.
//
// Thread safety: LoadStats is a plain value, not safe for concurrent use.
#ifndef NORMD_LOAD_LOAD_STATS_H_
#define NORMD_LOAD_LOAD_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "normd/v1/normd.pb.h"

namespace normd {

struct LoadStats {
  std::map<std::string, std::vector<int64_t>> latencies_us;  // by status code name
  int64_t sent = 0, ok = 0, failed = 0;
  int64_t wrong_id = 0;  // answers carrying another request's id (must stay 0)
  int64_t batched = 0;   // answers whose server run was shared with other requests
  // Open loop: how late each request left against its schedule (the generator's own
  // delay, included in its latency): when this is near the latency, the client is the
  // bottleneck, not the server.
  std::vector<int64_t> send_late_us;

  // Counts one answer: its code, its latency and, when a response came (`answer`), whether
  // it carried `sent_id` and came from a shared run.
  void Record(absl::StatusCode code, const v1::NormalizeResponse* answer,
              const std::string& sent_id, int64_t latency_us);
  void Merge(const LoadStats& other);
  std::vector<int64_t> AllLatencies() const;  // every code, sorted
};

// Nearest-rank percentile of sorted values; 0 when empty.
int64_t Percentile(const std::vector<int64_t>& sorted, double p);
// {"count": n, "p50": .., "p90": .., "p99": .., "max": ..}
std::string LatencyJson(std::vector<int64_t> values);

}  // namespace normd

#endif  // NORMD_LOAD_LOAD_STATS_H_
