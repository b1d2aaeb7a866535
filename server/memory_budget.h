// normd's one memory budget (--max-memory): what a request holds from the moment its
// message is handed over by gRPC until its answer has been sent (the parsed request, its
// outputs, the response) is reserved here first; a request that does not fit is answered
// RESOURCE_EXHAUSTED at once, before anything is copied or computed. gRPC's own buffers
// (the messages being received, before they are handed over) are bounded by the other part
// of the budget, gRPC's ResourceQuota, which slows reading and finally refuses streams when
// it runs short (server.cc splits the budget between the two).
//
//   absl::StatusOr<MemoryBudget::Reservation> r = budget.Reserve(bytes);
//   if (!r.ok()) return r.status();  // RESOURCE_EXHAUSTED, with the figures
//   ... // the memory is released when *r is destroyed
//
// Thread safety: every method may be called from any thread; a Reservation belongs to one
// owner at a time (movable, not copyable).
#ifndef NORMD_SERVER_MEMORY_BUDGET_H_
#define NORMD_SERVER_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"

namespace normd::server {

class MemoryBudget {
 public:
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation() { Release(); }
    // Adds `bytes` to this reservation (RESOURCE_EXHAUSTED, unchanged, when they do not fit).
    absl::Status Grow(int64_t bytes);
    void Release();
    int64_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // `limit` <= 0: unlimited (every reservation succeeds, and is still counted).
  explicit MemoryBudget(int64_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  absl::StatusOr<Reservation> Reserve(int64_t bytes);

  int64_t limit() const { return limit_; }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  // Bytes released since the last call (the trimmer's cue that memory came free).
  int64_t TakeReleased() { return released_.exchange(0, std::memory_order_relaxed); }
  // Reservations refused since start.
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  bool TryTake(int64_t bytes);
  void Give(int64_t bytes);

  const int64_t limit_;
  std::atomic<int64_t> used_{0}, released_{0}, refused_{0};
};

// The default --max-memory: half of the memory this process may use, the container's
// limit (cgroup v2 memory.max, or v1 memory.limit_in_bytes) when it has one, else the
// machine's (MemTotal). The other half is left for the program, its threads' stacks, the
// allocator's slack and the page cache.
int64_t DefaultMemoryBudget();

}  // namespace normd::server

#endif  // NORMD_SERVER_MEMORY_BUDGET_H_
