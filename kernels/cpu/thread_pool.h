// A persistent pool of worker threads for the CPU kernels: ParallelFor splits [0, n) into
// contiguous pieces, a few per thread, which the calling thread and the workers claim in
// order as they come free; fn may be called several times on one thread.
//
// Denormals: every worker runs with FTZ/DAZ set (x86: MXCSR flush-to-zero and
// denormals-are-zero), and ParallelFor sets them on the calling thread for the duration of
// the call, so results never depend on which thread ran a row: inputs below 2^-126 count
// as zero and outputs that small are flushed. This keeps a client's denormal-filled tensor
// from running 100x slower on the microcoded path.
//
// Wake-up: workers spin for 50 us (a pause loop bounded by the clock) before sleeping on a
// condition variable, and so does the caller waiting for them; a condition-variable
// wake-up alone cost a 64x4096 RMSNorm its two-thread speedup (0.85x; 1.6-1.8x with the
// spin). The price is that much CPU after each job; a longer spin (0.5 ms, from a count of
// pauses) held the cores other threads needed and made a 4 MiB call's kernel 0.6-1.1 ms
// instead of 0.1-0.2 (BENCHMARKS.md, "Large tensors").
// A worker woken onto its caller's CPU does not spin there afterwards; it yields that CPU
// once, or for a job of kLongJobBytes or more moves to another CPU (thread_pool.cc).
//
// Thread safety: ParallelFor may be called from many threads at once; one call uses the
// workers at a time and a concurrent call runs its whole range inline on its own thread
// (still with FTZ/DAZ) instead of waiting.
#ifndef NORMD_KERNELS_CPU_THREAD_POOL_H_
#define NORMD_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace normd::kernels::cpu {

// Sets FTZ/DAZ for its lifetime and restores the previous mode.
class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  unsigned saved_ = 0;
};

class ThreadPool {
 public:
  // threads >= 1 counts the calling thread: threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on at most max_threads threads over contiguous pieces covering
  // [0, n) exactly once (a thread may run several pieces, and the caller all of them when
  // the workers are slow to wake); returns when all are done. job_bytes: the bytes the job
  // reads and writes, or 0 where unknown (then it counts as short).
  void ParallelFor(int64_t n, int max_threads, int64_t job_bytes,
                   const std::function<void(int64_t begin, int64_t end)>& fn);
  void ParallelFor(int64_t n, int max_threads,
                   const std::function<void(int64_t begin, int64_t end)>& fn) {
    ParallelFor(n, max_threads, 0, fn);
  }

  // Jobs of at least this many bytes are long: a worker woken onto the caller's CPU moves
  // to another rather than yielding (thread_pool.cc says why, and where it was measured).
  static constexpr int64_t kLongJobBytes = int64_t{4} << 20;

 private:
  // A job is cut into up to kPiecesPerThread pieces per thread. Each thread runs the
  // pieces of its own share first (so that, with every thread prompt, each gets the
  // contiguous share a static split would give it, and a repeated job finds its data in
  // the same core's cache), then takes what is left of the others' shares: a worker that
  // wakes late (a sleeping thread's wake-up takes 50-200 us on this VM) finds the caller
  // has done its share, instead of the caller waiting for it with half the job undone.
  static constexpr int kPiecesPerThread = 4;
  // A claim word: the job's generation (low 32 bits; a worker would have to sleep through
  // 2^32 jobs to mistake one for another), the end of a share and its next piece.
  static constexpr int kPieceBits = 16;  // pieces <= 4 * threads < 2^16
  static constexpr uint64_t kPieceMask = (uint64_t{1} << kPieceBits) - 1;
  static uint64_t ClaimWord(uint64_t generation, uint64_t limit, uint64_t next) {
    return ((generation & 0xffffffffu) << 2 * kPieceBits) | (limit << kPieceBits) | next;
  }
  static bool SameJob(uint64_t claim, uint64_t generation) {
    return (claim >> 2 * kPieceBits) == (generation & 0xffffffffu);
  }
  struct alignas(64) Claim {  // one cache line each: the threads claim at once
    std::atomic<uint64_t> value{0};
  };

  void WorkerLoop(int index);
  void RunPieces(int index, uint64_t generation);

  std::vector<std::thread> workers_;
  std::mutex use_mu_;  // held by the call that owns the workers

  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;  // of the last job published, under mu_
  bool stop_ = false;
  // The job: written by its owner under mu_ before the claim words name it, read by the
  // threads that claimed one of its pieces.
  int64_t n_ = 0;
  int pieces_ = 0;
  int active_ = 0;         // threads taking part, the caller included: workers 1..active_-1
  int owner_cpu_ = -1;     // the CPU the caller ran on when it published the job, or -1
  bool long_job_ = false;  // job_bytes >= kLongJobBytes
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  // Thread t's share as ClaimWord(generation, end, next piece); and the pieces finished.
  std::vector<Claim> claims_;
  std::atomic<int> done_pieces_{0};
  // Lock-free mirror of generation_ for the workers' short spin before sleeping.
  std::atomic<uint64_t> published_{0};
};

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_THREAD_POOL_H_
