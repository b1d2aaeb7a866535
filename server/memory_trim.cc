#include "server/memory_trim.h"

#include <malloc.h>

namespace normd::server {

MemoryTrimmer::MemoryTrimmer(MemoryBudget* budget, absl::Duration period, int64_t min_released)
    : thread_([this, budget, period, min_released] {
        int64_t released = 0;
        while (!stop_.WaitForNotificationWithTimeout(period)) {
          released += budget->TakeReleased();
          if (released >= min_released) {
            malloc_trim(0);
            released = 0;
          }
        }
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  stop_.Notify();
  thread_.join();
}

}  // namespace normd::server
