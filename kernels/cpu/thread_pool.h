// A persistent pool of worker threads for the CPU kernels: ParallelFor splits [0, n) into
// static contiguous chunks, one per thread, and the calling thread runs chunk 0.
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

  // Calls fn(begin, end) on at most max_threads threads over contiguous chunks covering
  // [0, n) exactly once; returns when all are done.
  void ParallelFor(int64_t n, int max_threads,
                   const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex use_mu_;  // held by the call that owns the workers

  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  int active_ = 0;  // threads taking part in the current call, caller included
  int64_t n_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  bool stop_ = false;
  // Lock-free mirrors of generation_ for the short spin before sleeping: the last job
  // published, and the last one whose workers all finished.
  std::atomic<uint64_t> published_{0}, finished_{0};
};

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_THREAD_POOL_H_
