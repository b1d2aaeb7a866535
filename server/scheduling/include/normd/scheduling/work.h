// One request's unit of scheduling: its validated Job plus what the scheduler needs to
// queue, batch, expire and answer it. Transport creates a Work, hands it to
// Scheduler::Enqueue, and learns the outcome through `done`.
//
// Thread safety: a Work is owned by one thread at a time (transport, then the scheduler);
// `cancelled` may be set from any thread.
#ifndef NORMD_SCHEDULING_WORK_H_
#define NORMD_SCHEDULING_WORK_H_

#include <atomic>
#include <memory>
#include <vector>
#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "normd/kernels/backend.h"
#include "normd/scheduling/job.h"

namespace normd::server {

// What happened to a Work that ran.
struct WorkResult {
  kernels::BackendKind backend = kernels::BackendKind::kCpu;
  absl::Duration queue;    // enqueued -> its backend run started
  absl::Duration compute;  // the backend run it was part of
  int batch_requests = 1;  // requests that shared that run
};

struct Work {
  Job job;
  // Memory the request holds while it waits (request + response messages): counted
  // against --max-queue-bytes.
  int64_t bytes = 0;
  // Queued work past its deadline is answered DEADLINE_EXCEEDED and never computed.
  absl::Time deadline = absl::InfiniteFuture();
  // Set by the call when the client cancels; queued work seen cancelled is dropped.
  // Optional; must outlive the Work's `done` call.
  const std::atomic<bool>* cancelled = nullptr;
  // What the job's tensors point into besides the call's messages (the shared-memory
  // mappings of its references), held until the Work is destroyed.
  std::vector<std::shared_ptr<const void>> held;
  // Called exactly once, with OK and the result, or with the reason it did not run. It
  // runs on whichever thread finished the work (an executor, the enqueuing thread for
  // inline work, a Cancel caller) and must not block.
  absl::AnyInvocable<void(const absl::Status&, const WorkResult&)> done;

  // Filled in by the scheduler.
  uint64_t id = 0;
  absl::Time enqueued;
};

}  // namespace normd::server

#endif  // NORMD_SCHEDULING_WORK_H_
