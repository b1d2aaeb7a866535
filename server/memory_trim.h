// Gives freed heap memory back to the system once requests stop reusing it. glibc keeps
// freed chunks in its arenas for reuse; after a burst of large requests (their messages
// arrive in many gRPC slices, and the per-thread arenas each keep what they freed) normd
// would stay at its peak RSS. Once a period the trimmer asks its TrimPolicy whether to
// call malloc_trim(0), which returns the free pages of every arena. The policy keeps as
// much resident free memory as requests released in the last few periods (the next
// requests would fault anything less straight back in, 11.5 us a page on the VM of
// BENCHMARKS.md's seventy-third session) and trims what is beyond that: a burst's memory
// goes back a few periods after it ends, also under a lighter load that goes on, and a
// caller that comes back within those periods finds its pages.
// Blocks of 4 MiB and more are mapped on their own and unmapped when freed, and a thread
// arena's top beyond 8 MiB goes back on free (TuneProcessForMessages: malloc_trim cannot
// shrink those tops); this is for the rest.
//
// Thread safety: MemoryTrimmer owns one thread; construct and destroy it from one thread.
// TrimPolicy is a plain value for one thread. ResidentFreeHeapBytes may be called from any
// thread.
#ifndef NORMD_SERVER_MEMORY_TRIM_H_
#define NORMD_SERVER_MEMORY_TRIM_H_

#include <array>
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
  // The periods whose releases count as memory the load still uses.
  static constexpr int kWindowPeriods = 4;

  // `slack`: resident free bytes beyond what the rule keeps that are not worth a trim.
  explicit TrimPolicy(int64_t slack) : slack_(slack) {}

  // One period's end: `released`, the budget's bytes released during it; `resident_free`,
  // the free heap bytes still resident now (ResidentFreeHeapBytes). Trims when they exceed
  // what the last trim could not return (the floor) by more than the releases of the last
  // kWindowPeriods periods and the slack. After a trim, the caller reports the resident
  // free bytes left with Trimmed.
  bool Tick(int64_t released, int64_t resident_free);
  void Trimmed(int64_t resident_free) { floor_ = resident_free; }

 private:
  const int64_t slack_;
  std::array<int64_t, kWindowPeriods> window_{};  // the last periods' releases, a ring
  int next_ = 0;
  // What a trim left resident (arenas' tops it cannot shrink, pages of free chunks it does
  // not cover), or lower since: not worth trimming again.
  int64_t floor_ = 0;
};

// The heap's free bytes that are resident: the process's resident anonymous memory less
// what malloc has handed out (mallinfo2's uordblks and hblkhd). Also counts other
// anonymous memory (thread stacks), which the policy's floor absorbs; 0 if it cannot be
// read.
int64_t ResidentFreeHeapBytes();

class MemoryTrimmer {
 public:
  MemoryTrimmer(MemoryBudget* budget, absl::Duration period, int64_t slack = 1 << 20);
  ~MemoryTrimmer();  // stops the thread
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_MEMORY_TRIM_H_
