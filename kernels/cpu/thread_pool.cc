#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace normd::kernels::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR FTZ (bit 15) | DAZ (bit 6)
unsigned GetMode() { return _mm_getcsr(); }
void SetMode(unsigned mode) { _mm_setcsr(mode); }
#else
constexpr unsigned kFtzDaz = 0;
unsigned GetMode() { return 0; }
void SetMode(unsigned) {}
#endif

// How long a worker waiting for a job, or a caller waiting for its workers, spins before
// it sleeps. Bounded by the clock, not by a count of pause instructions: a pause takes
// anywhere from ~10 cycles (older Intel cores) to ~25 ns (this machine's AMD EPYC, where
// the 20000 pauses that were meant as 20-50 us spun for 0.5 ms and held a core that other
// threads of the process were waiting for: BENCHMARKS.md, "Large tensors").
constexpr auto kSpin = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins until done() or kSpin has passed; true when done().
template <typename Done>
bool SpinUntil(const Done& done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

// Chunk t of n split into `parts` contiguous pieces.
void Chunk(int64_t n, int parts, int t, int64_t* begin, int64_t* end) {
  *begin = n * t / parts;
  *end = n * (t + 1) / parts;
}

}  // namespace

// Writing MXCSR costs tens of cycles, a visible share of a 1x4096 call: skipped when the
// thread already flushes (the pool's workers, a caller that set it).
ScopedFlushDenormals::ScopedFlushDenormals() : saved_(GetMode()) {
  if ((saved_ & kFtzDaz) != kFtzDaz) SetMode(saved_ | kFtzDaz);
}
ScopedFlushDenormals::~ScopedFlushDenormals() {
  if ((saved_ & kFtzDaz) != kFtzDaz) SetMode(saved_);
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::WorkerLoop(int index) {
  SetMode(GetMode() | kFtzDaz);
  uint64_t seen = 0;
  for (;;) {
    int64_t n;
    int active;
    const std::function<void(int64_t, int64_t)>* fn;
    // Spin briefly before sleeping: a condition-variable wake-up costs tens of
    // microseconds, a large share of a ~100 us job.
    SpinUntil([&] { return published_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      n = n_;
      active = active_;
      fn = fn_;
    }
    if (index < active) {
      int64_t begin, end;
      Chunk(n, active, index, &begin, &end);
      if (begin < end) (*fn)(begin, end);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) {
      finished_.store(seen, std::memory_order_release);
      done_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int max_threads,
                             const std::function<void(int64_t, int64_t)>& fn) {
  ScopedFlushDenormals flush;
  const int parts = static_cast<int>(std::min<int64_t>({n, max_threads, threads()}));
  std::unique_lock<std::mutex> owner(use_mu_, std::defer_lock);
  if (parts <= 1 || !owner.try_lock()) {
    if (n > 0) fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    n_ = n;
    active_ = parts;
    fn_ = &fn;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
    published_.store(generation_, std::memory_order_release);
  }
  wake_.notify_all();
  int64_t begin, end;
  Chunk(n, parts, 0, &begin, &end);
  fn(begin, end);
  const uint64_t mine = generation_;  // only this owner changes it
  SpinUntil([&] { return finished_.load(std::memory_order_acquire) == mine; });
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace normd::kernels::cpu
