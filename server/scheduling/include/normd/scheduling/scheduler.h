// The scheduling room's door, between transport and the backends.
//
// Enqueue(work) routes a Work to a backend lane and answers through work->done. Each lane
// (one per backend) has a FIFO queue bounded by request count and bytes, and executor
// threads that take the head of the queue together with the queued requests it can share
// a backend run with (dynamic, ragged batching: row-wise ops of one dtype, any sizes and
// parameters, up to batch_max_rows / batch_max_bytes, waiting at most batch_max_delay for
// more to arrive). Queued work whose deadline passed or whose call was cancelled is
// answered without being computed.
//
// Routing: an explicit CPU or CUDA preference is honoured (CUDA absent:
// FAILED_PRECONDITION); AUTO picks CUDA when a CUDA backend is present and the input is at
// least cuda_min_bytes, else CPU.
//
// Shortest path: small CPU work (at most inline_max_bytes) that finds the CPU queue empty
// and an inline slot free (one per CPU thread) runs on the enqueuing thread, without a
// thread hop; everything else goes through the queue.
//
// Thread safety: every method may be called concurrently from any thread.
#ifndef NORMD_SCHEDULING_SCHEDULER_H_
#define NORMD_SCHEDULING_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "normd/kernels/backend.h"
#include "normd/scheduling/work.h"

namespace normd::server {

struct SchedulerOptions {
  int64_t cuda_min_bytes = 1 << 20;
  int64_t max_queue_requests = 1024;  // per backend
  int64_t max_queue_bytes = 1 << 30;  // per backend
  // Dynamic batching; batch_max_rows <= 1 turns it off.
  int64_t batch_max_rows = 8192;
  int64_t batch_max_bytes = 16 << 20;
  absl::Duration cpu_batch_max_delay = absl::ZeroDuration();
  absl::Duration cuda_batch_max_delay = absl::ZeroDuration();
  // CPU work of at most this many bytes (its tensors in and out, on the wire or in shared
  // memory) may run inline; 0: never. 1 MiB takes in the client's 256 KiB chunks (a
  // 30-60 us kernel on the transport thread): handing each to an executor cost more than
  // it saved (BENCHMARKS.md, "Large tensors", seventeenth session).
  int64_t inline_max_bytes = 1 << 20;
  int cpu_executors = 0;   // 0: the CPU backend's thread count
  int cuda_executors = 2;  // one run computing while the next one's copies go
  // Told of every failed backend run (lane name, requests in it, the status), on the
  // executor's thread; the scheduling room logs nothing itself. May be empty.
  std::function<void(absl::string_view lane, size_t requests, const absl::Status& status)>
      on_backend_error;
};

// Counters since start, for tests and logs.
struct SchedulerStats {
  int64_t enqueued = 0;         // accepted by Enqueue
  int64_t inline_runs = 0;      // of those, run on the enqueuing thread
  int64_t rejected_full = 0;    // UNAVAILABLE: queue full
  int64_t expired = 0;          // DEADLINE_EXCEEDED while queued
  int64_t cancelled = 0;        // dropped while queued
  int64_t backend_runs = 0;     // backend calls made by executors
  int64_t batched = 0;          // requests that shared a backend run with others
  int64_t completed = 0;        // done called (any status)
  int64_t queued_requests = 0;  // now
  int64_t queued_bytes = 0;     // now
  int64_t in_flight = 0;        // accepted and not yet done, now
};

class Scheduler {
 public:
  // REQUIRES: backends holds at most one backend per kind, and a CPU one.
  Scheduler(std::vector<std::shared_ptr<kernels::Backend>> backends, SchedulerOptions options);
  ~Scheduler();  // Shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Ownership (Triton's rule): on success the scheduler takes `work` (it is left null),
  // returns its id, and will call work->done exactly once, possibly before Enqueue
  // returns. On failure `work` is untouched, done is never called, and the caller answers
  // with the status: FAILED_PRECONDITION (CUDA requested but absent), UNAVAILABLE (the
  // queue is full, or the scheduler is shutting down), CANCELLED or DEADLINE_EXCEEDED (the
  // call was cancelled or its deadline passed before it got here).
  absl::StatusOr<uint64_t> Enqueue(std::unique_ptr<Work>& work);

  // Takes queued work `id` out and answers it with `status` (CANCELLED or
  // DEADLINE_EXCEEDED), freeing its queue space at once. Returns false when `id` is not
  // queued (running, done, or inline): running work is never interrupted.
  bool Cancel(uint64_t id, const absl::Status& status);

  // Stops accepting work, waits until queued and running work is done, joins executors.
  void Shutdown();

  SchedulerStats stats() const;

  // The backends present, for GetServerInfo.
  const std::vector<std::shared_ptr<kernels::Backend>>& backends() const { return backends_; }

 private:
  struct Lane;

  absl::StatusOr<Lane*> Route(const Job& job) const;
  void ExecutorLoop(Lane* lane);
  // Runs `batch` on the lane's backend and answers every Work in it.
  void RunBatch(Lane* lane, std::vector<std::unique_ptr<Work>>& batch);
  void Finish(std::unique_ptr<Work> work, const absl::Status& status, const WorkResult& result);

  std::vector<std::shared_ptr<kernels::Backend>> backends_;
  SchedulerOptions options_;
  std::unique_ptr<Lane> cpu_, cuda_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int> inline_free_{0};
  std::atomic<bool> stopping_{false};

  mutable absl::Mutex stats_mu_;
  SchedulerStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace normd::server

#endif  // NORMD_SCHEDULING_SCHEDULER_H_
