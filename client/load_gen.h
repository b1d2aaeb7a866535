// Load generation shared by normbench and the serving benchmarks: closed-loop callers on
// gRPC's callback API and an open-loop sender on a completion queue polled by its own
// thread (no thread per request in flight: on a 2-core machine shared with the server, 64
// blocking client threads cost more CPU than the calls), per-status-code latency records,
// and their JSON summary.
//
// Thread safety: ClosedLoop blocks the calling thread and gathers answers from gRPC's
// threads under its own lock; OpenLoop does all its work on the calling thread; LoadStats
// is a plain value, not safe for concurrent use.
#ifndef NORMD_CLIENT_LOAD_GEN_H_
#define NORMD_CLIENT_LOAD_GEN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "normd/client.h"

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

struct ClosedLoopOptions {
  int64_t callers = 1;
  absl::Time end;
  bool stream = false;  // one NormalizeStream per caller instead of unary calls
  bool echo = false;    // Echo / EchoStream instead of Normalize
};

// `callers` callers, taking turns over `clients`, each keep one request in flight until
// `end` (ids "caller-n"): the next goes when the last is answered. Latency is from send to
// answer. Returns when every caller has stopped.
LoadStats ClosedLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                     const ClosedLoopOptions& options);

struct OpenLoopOptions {
  double rate = 1000;  // requests per second, in all
  absl::Time start, end;
  int64_t max_in_flight = 1024;
  bool echo = false;  // Echo instead of Normalize
};

// Sends request n (its id set to "n") at start + n / rate until `end`, asynchronously and
// round-robin over `clients`, with at most max_in_flight outstanding: a send that finds
// that many waits for one to finish. Returns when every call is answered. Latency counts
// from the scheduled time, so any wait, here or in the server, shows in it (no
// coordinated omission). One thread sends and takes the answers from a completion queue,
// polling at least every 100 us: no thread is woken per answer (client CPU per call at
// 10000 calls/s on the 2-core VM: about 60 us, against 75 with a receiver thread blocking
// on the queue and 97 on gRPC's callback threads), and an answer is timed up to 100 us
// (plus sleep overshoot) late, which counts against it.
LoadStats OpenLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                   const OpenLoopOptions& options);

// Nearest-rank percentile of sorted values; 0 when empty.
int64_t Percentile(const std::vector<int64_t>& sorted, double p);
// {"count": n, "p50": .., "p90": .., "p99": .., "max": ..}
std::string LatencyJson(std::vector<int64_t> values);

}  // namespace normd

#endif  // NORMD_CLIENT_LOAD_GEN_H_
