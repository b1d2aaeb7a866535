#include "server/memory_trim.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace normd::server {

bool TrimPolicy::Tick(int64_t released, int64_t resident_free) {
  window_[next_] = released;
  next_ = (next_ + 1) % kWindowPeriods;
  // The releases of several periods, not the busiest one's: a caller of large tensors once
  // every second or two releases a call's worth a period or none, and the arenas keep
  // about a call's worth free between its calls (gRPC's slices of the message received and
  // of the answer sent, about the reservation's two message sizes).
  const int64_t keep = std::accumulate(window_.begin(), window_.end(), int64_t{0});
  if (resident_free > floor_ + keep + slack_) return true;
  floor_ = std::min(floor_, resident_free);
  return false;
}

int64_t ResidentFreeHeapBytes() {
  // statm: sizes in pages; resident less shared (file and shared-memory pages) is the
  // anonymous resident memory, which holds every arena and every mapped block.
  long size = 0, resident = 0, shared = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const int got = std::fscanf(f, "%ld %ld %ld", &size, &resident, &shared);
  std::fclose(f);
  if (got != 3) return 0;
  const int64_t anon = static_cast<int64_t>(resident - shared) * sysconf(_SC_PAGESIZE);
  const struct mallinfo2 info = mallinfo2();
  return std::max<int64_t>(0, anon - static_cast<int64_t>(info.uordblks + info.hblkhd));
}

MemoryTrimmer::MemoryTrimmer(MemoryBudget* budget, absl::Duration period, int64_t slack)
    : thread_([this, budget, period, slack] {
        TrimPolicy policy(slack);
        policy.Trimmed(ResidentFreeHeapBytes());  // what the process holds at the start
        while (!stop_.WaitForNotificationWithTimeout(period)) {
          if (policy.Tick(budget->TakeReleased(), ResidentFreeHeapBytes())) {
            malloc_trim(0);
            policy.Trimmed(ResidentFreeHeapBytes());
          }
        }
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  stop_.Notify();
  thread_.join();
}

}  // namespace normd::server
