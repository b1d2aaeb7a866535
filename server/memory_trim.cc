#include "server/memory_trim.h"

#include <malloc.h>

namespace normd::server {

MemoryTrimmer::MemoryTrimmer(MemoryBudget* budget, absl::Duration period, int64_t min_released)
    : thread_([this, budget, period, min_released] {
        // gRPC frees what it held for a call (the received message's slices, the sent
        // answer's) shortly after normd releases the call's reservation: trimming goes on
        // for a few periods after the last release, so that those frees are returned too.
        constexpr int kTrailingPeriods = 5;
        int64_t released = 0;
        int trailing = 0;
        while (!stop_.WaitForNotificationWithTimeout(period)) {
          released += budget->TakeReleased();
          if (released >= min_released) {
            trailing = kTrailingPeriods;
            released = 0;
          }
          if (trailing > 0) {
            --trailing;
            malloc_trim(0);
          }
        }
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  stop_.Notify();
  thread_.join();
}

}  // namespace normd::server
