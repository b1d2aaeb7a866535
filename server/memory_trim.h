// Gives freed heap memory back to the system after a burst. glibc keeps freed chunks in
// its arenas for reuse; after a burst of large requests (their messages arrive in many
// gRPC slices, and the per-thread arenas each keep what they freed) normd would stay at
// its peak RSS. Once a period the trimmer asks its TrimPolicy whether to call
// malloc_trim(0), which returns the free pages of every arena: for a few periods after
// requests released at least `min_released` bytes of the memory budget (gRPC frees its
// buffers of a call a little after the call's reservation is released), and whenever the
// free bytes the arenas hold grew by `min_released` since the last trim (frees after that
// window); but not while requests recycle memory at least as fast as the arenas hold it
// free, where the next requests would fault the returned pages straight back in.
// Blocks of 4 MiB and more are mapped on their own and unmapped when freed, and a thread
// arena's top beyond 8 MiB goes back on free (TuneProcessForMessages: malloc_trim cannot
// shrink those tops); this is for the rest.
//
// Thread safety: MemoryTrimmer owns one thread; construct and destroy it from one thread.
// TrimPolicy is a plain value for one thread.
#ifndef NORMD_SERVER_MEMORY_TRIM_H_
#define NORMD_SERVER_MEMORY_TRIM_H_

#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/memory_budget.h"

namespace normd::server {

// When to trim, from what each period saw: the trimmer's rules without its thread or
// malloc, so that tests can step them.
class TrimPolicy {
 public:
  // Periods that go on trimming after the last period whose releases reached min_released.
  static constexpr int kTrailingPeriods = 5;

  // `free_bytes`: the arenas' free bytes when the trimmer starts.
  TrimPolicy(int64_t min_released, int64_t free_bytes)
      : min_released_(min_released), free_floor_(free_bytes) {}

  // One period's end: `released`, the budget's bytes released during it; `free_bytes`, the
  // free bytes the arenas hold now (mallinfo2's fordblks). Returns whether to trim now;
  // after a trim, the caller reports the free bytes with Trimmed.
  bool Tick(int64_t released, int64_t free_bytes);
  void Trimmed(int64_t free_bytes) { free_floor_ = free_bytes; }

 private:
  const int64_t min_released_;
  int64_t released_ = 0;  // since the last period that reached min_released
  int trailing_ = 0;      // trims still due after the last release
  int64_t free_floor_;    // the arenas' free bytes after the last trim, or lowest since
};

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
