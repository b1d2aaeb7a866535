// Gives freed heap memory back to the system after a burst. glibc keeps freed chunks in
// its arenas for reuse; after a burst of large requests (their messages arrive in many
// gRPC slices, and the per-thread arenas each keep what they freed) normd would stay at
// its peak RSS. Once a period, when requests released at least `min_released` bytes of the
// memory budget since the last look, the trimmer calls malloc_trim(0), which returns free
// pages of every arena, and goes on doing so for a few periods (gRPC frees its buffers of
// a call a little after the call's reservation is released), and whenever the free bytes the
// arenas hold grew by `min_released` since the last trim (frees after that window).
// Blocks of 4 MiB and more are mapped on their own and unmapped when freed, and a thread
// arena's top beyond 8 MiB goes back on free (TuneProcessForMessages: malloc_trim cannot
// shrink those tops); this is for the rest.
//
// Thread safety: owns one thread; construct and destroy from one thread.
#ifndef NORMD_SERVER_MEMORY_TRIM_H_
#define NORMD_SERVER_MEMORY_TRIM_H_

#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/memory_budget.h"

namespace normd::server {

class MemoryTrimmer {
 public:
  MemoryTrimmer(MemoryBudget* budget, absl::Duration period, int64_t min_released = 1 << 20);
  ~MemoryTrimmer();  // stops the thread
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_MEMORY_TRIM_H_
