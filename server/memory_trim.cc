#include "server/memory_trim.h"

#include <malloc.h>

#include <algorithm>

namespace normd::server {

bool TrimPolicy::Tick(int64_t released, int64_t free_bytes) {
  released_ += released;
  bool recycled = false;
  if (released_ >= min_released_) {
    trailing_ = kTrailingPeriods;
    // Requests released at least as much as the arenas hold free: the memory is being
    // reused, and what a trim returned the next requests would fault back in, a page at a
    // time (11.5 us a page on the VM of BENCHMARKS.md's seventy-third session, where trims
    // once a second under 64 MiB chunked calls cost 190-450 faults a call). The trims
    // come in the periods after the load stops.
    recycled = released_ >= free_bytes;
    released_ = 0;
  }
  // mallinfo2 counts free chunks, trimmed or not: frees later than the trailing periods (a
  // connection's buffers when its client goes away, calls refused before they reserved
  // anything, threads starved on a busy machine) show as growth since the last trim.
  const bool grew = free_bytes > free_floor_ + min_released_;
  if (!recycled && (trailing_ > 0 || grew)) {
    trailing_ = std::max(trailing_ - 1, 0);
    return true;
  }
  free_floor_ = std::min(free_floor_, free_bytes);
  return false;
}

MemoryTrimmer::MemoryTrimmer(MemoryBudget* budget, absl::Duration period, int64_t min_released)
    : thread_([this, budget, period, min_released] {
        TrimPolicy policy(min_released, static_cast<int64_t>(mallinfo2().fordblks));
        while (!stop_.WaitForNotificationWithTimeout(period)) {
          if (policy.Tick(budget->TakeReleased(), static_cast<int64_t>(mallinfo2().fordblks))) {
            malloc_trim(0);
            policy.Trimmed(static_cast<int64_t>(mallinfo2().fordblks));
          }
        }
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  stop_.Notify();
  thread_.join();
}

}  // namespace normd::server
