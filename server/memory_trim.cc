#include "server/memory_trim.h"

#include <malloc.h>

#include <algorithm>

namespace normd::server {

MemoryTrimmer::MemoryTrimmer(MemoryBudget* budget, absl::Duration period, int64_t min_released)
    : thread_([this, budget, period, min_released] {
        // gRPC frees what it held for a call (the received message's slices, the sent
        // answer's) shortly after normd releases the call's reservation: trimming goes on
        // for a few periods after the last release, so that those frees are returned too.
        // Frees later than that (a connection's buffers when its client goes away, calls
        // refused before they reserved anything, threads starved on a busy machine) show as
        // free bytes held in the arenas: a trim also runs when those grew by min_released
        // since the last one (mallinfo2 counts free chunks, trimmed or not).
        constexpr int kTrailingPeriods = 5;
        int64_t released = 0;
        int trailing = 0;
        size_t free_after_trim = mallinfo2().fordblks;
        while (!stop_.WaitForNotificationWithTimeout(period)) {
          released += budget->TakeReleased();
          if (released >= min_released) {
            trailing = kTrailingPeriods;
            released = 0;
          }
          const size_t free_now = mallinfo2().fordblks;
          const bool grew = free_now > free_after_trim + static_cast<size_t>(min_released);
          if (trailing > 0 || grew) {
            trailing = std::max(trailing - 1, 0);
            malloc_trim(0);
            free_after_trim = mallinfo2().fordblks;
          } else {
            free_after_trim = std::min(free_after_trim, free_now);
          }
        }
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  stop_.Notify();
  thread_.join();
}

}  // namespace normd::server
