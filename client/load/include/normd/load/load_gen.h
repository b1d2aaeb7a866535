// Load generation shared by normbench and the serving benchmarks: closed-loop callers on
// gRPC's callback API and an open-loop sender on a completion queue polled by its own
// thread (no thread per request in flight: on a 2-core machine shared with the server, 64
// blocking client threads cost more CPU than the calls), recording into a LoadRecorder.
//
// A run sends the kinds of a Workload (workload.h) and stops at `end`, when `stop` is set,
// or when the recorder's measured requests reach its limit, whichever comes first; every
// request sent is answered (or fails) before the generator returns. The recorder decides
// which answers count: those of requests sent after the measurement began (a warmup's
// answers are dropped).
//
// Thread safety: ClosedLoop blocks the calling thread and gathers answers from gRPC's
// threads; OpenLoop does its work on the calling thread (and one thread per stream with
// `stream`), but for the answers of chunked calls, which come on gRPC's threads.
#ifndef NORMD_LOAD_LOAD_GEN_H_
#define NORMD_LOAD_LOAD_GEN_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "normd/client.h"
#include "normd/load/load_recorder.h"
#include "normd/load/load_stats.h"
#include "normd/load/workload.h"

namespace normd {

struct ClosedLoopOptions {
  int64_t callers = 1;
  absl::Time end = absl::InfiniteFuture();
  const std::atomic<bool>* stop = nullptr;  // set by another thread to end the run
  bool stream = false;                      // one NormalizeStream per caller instead of unary calls
  bool echo = false;                        // Echo / EchoStream instead of Normalize
};

// `callers` callers, taking turns over `clients`, each keep one request in flight (ids
// "caller-n"): the next goes when the last is answered. Latency is from send to answer.
// Returns when every caller has stopped.
void ClosedLoop(const std::vector<Client*>& clients, const Workload& workload,
                LoadRecorder* recorder, const ClosedLoopOptions& options);
// One request, every answer recorded.
LoadStats ClosedLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                     const ClosedLoopOptions& options);

struct OpenLoopOptions {
  double rate = 1000;    // requests per second, in all
  bool poisson = false;  // exponential gaps of mean 1/rate instead of constant ones
  uint64_t seed = 1;     // of the Poisson gaps
  absl::Time start, end = absl::InfiniteFuture();
  const std::atomic<bool>* stop = nullptr;
  int64_t max_in_flight = 1024;  // unary; with `stream`, the number of streams
  bool echo = false;             // Echo instead of Normalize
  bool stream = false;  // NormalizeStream: max_in_flight streams, each its share of the rate
};

// Sends request n (its id set to "n") at its scheduled time until the run ends,
// asynchronously and round-robin over `clients`, with at most max_in_flight outstanding:
// a send that finds that many waits for one to finish. Returns when every call is
// answered. Latency counts from the scheduled time, so any wait, here or in the server,
// shows in it (no coordinated omission). One thread sends and takes the answers from a
// completion queue, polling at least every 100 us: no thread is woken per answer (client
// CPU per call at 10000 calls/s on the 2-core VM: about 60 us, against 75 with a
// receiver thread blocking on the queue and 97 on gRPC's callback threads), and an answer
// is timed up to 100 us (plus sleep overshoot) late, which counts against it. Requests
// the client sends as row chunks (Client::Chunks) go through NormalizeAsync instead, as in
// the closed loop, and are timed on gRPC's thread when their answer is complete.
void OpenLoop(const std::vector<Client*>& clients, const Workload& workload, LoadRecorder* recorder,
              const OpenLoopOptions& options);
LoadStats OpenLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                   const OpenLoopOptions& options);

}  // namespace normd

#endif  // NORMD_LOAD_LOAD_GEN_H_
