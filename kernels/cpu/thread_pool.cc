#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "kernels/cpu/cpu_move.h"

#if defined(__linux__)
#include <sched.h>
#endif

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

// The CPU the calling thread runs on, or -1 where the platform does not say (then no two
// threads are taken to share one). glibc reads it from rseq: a load, not a system call.
int CurrentCpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

void YieldCpu() {
#if defined(__linux__)
  sched_yield();
#else
  std::this_thread::yield();
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

ThreadPool::ThreadPool(int threads) : claims_(static_cast<size_t>(std::max(1, threads))) {
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
  int owner_cpu = -1;
  bool long_job = false;
  for (;;) {
    int active;
    // Spin briefly before sleeping: a condition-variable wake-up costs tens of
    // microseconds (hundreds where the core had halted), a large share of a ~100 us job.
    // Not on the CPU of the last job's caller, which is most likely waiting there to run.
    if (owner_cpu < 0 || CurrentCpu() != owner_cpu) {
      SpinUntil([&] { return published_.load(std::memory_order_acquire) != seen; });
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      active = active_;
      owner_cpu = owner_cpu_;
      long_job = long_job_;
    }
    if (index >= active) continue;
    // Linux may wake a sleeping worker onto the CPU its caller runs on, with another core
    // idle (in a VM most likely because a halted vCPU counts as busy), and the worker then
    // preempts the caller: it ran the whole job alone, then spun while the caller waited
    // for the CPU. On this 2-core VM, 64x4096 LayerNorm calls 1 ms apart took 114-127 us
    // where that happened (half of them) against 58-71 us where the caller ran alone; with
    // the yield, 59-69 us (BENCHMARKS.md, issue 16, twenty-seventh session). Yielding once
    // hands the CPU back: the caller starts on its share, and may take the worker's.
    if (owner_cpu >= 0 && CurrentCpu() == owner_cpu) {
      // A long job: the worker moves itself to another CPU it may run on (ScopedMoveOffCpu),
      // where a yield left it queued behind its caller until the scheduler balanced the
      // CPUs, up to a tick later (4 ms at 250 Hz), with the other CPU idle: `perf sched
      // timehist` of normd's shared-memory calls on a 2-vCPU VM showed the caller and the
      // worker running a 64 MiB LayerNorm one after the other on one CPU (4.8 ms, about 2.9
      // where they ran side by side). The move costs the caller's CPU about 60 us (the
      // worker's system call and the migration thread), as long as a 1-2 MiB job, so shorter
      // jobs still yield (moved, RMSNorm bf16 64x4096 calls 1 ms apart took 35 us against
      // 29). Shared-memory LayerNorm f32 at 4 MiB, two sets of alternating rounds (six and
      // four) of normd-large-bench: the server's compute 0.12-0.68 ms -> 0.15-0.25; at 16
      // and 64 MiB, and in-process calls, within the rounds' spread (BENCHMARKS.md, issue
      // 15, seventy-second session).
      const ScopedMoveOffCpu move(long_job ? owner_cpu : -1);  // -1: no move
      if (!move.moved()) YieldCpu();
      RunPieces(index, seen);  // the mask comes back after the pieces
      continue;
    }
    RunPieces(index, seen);
  }
}

// Runs pieces of job `generation` until none is left, or the job is over (a worker that
// woke late finds its job's pieces all claimed, or a later job's generation): first the
// pieces of its own share, in order, then what is left of the others' shares. The
// generation and the next piece share one word, so a claim can only succeed for the job it
// was meant for, and that job's owner waits until every claimed piece is done: the job's
// fields and fn stay valid for as long as a piece of it runs.
void ThreadPool::RunPieces(int index, uint64_t generation) {
  const int threads = static_cast<int>(claims_.size());
  for (int k = 0; k < threads; ++k) {
    std::atomic<uint64_t>& word = claims_[(index + k) % threads].value;
    for (;;) {
      uint64_t claim = word.load(std::memory_order_acquire);
      uint64_t piece, limit;
      do {
        piece = claim & kPieceMask;
        limit = (claim >> kPieceBits) & kPieceMask;
        if (!SameJob(claim, generation) || piece >= limit) break;
      } while (!word.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel,
                                           std::memory_order_acquire));
      if (!SameJob(claim, generation)) return;  // the job is over
      if (piece >= limit) break;                // this share is done
      // Read before this piece counts as done: after that the owner may return and the
      // next job's owner rewrite them.
      const int pieces = pieces_;
      int64_t begin, end;
      Chunk(n_, pieces, static_cast<int>(piece), &begin, &end);
      if (begin < end) (*fn_)(begin, end);
      if (done_pieces_.fetch_add(1, std::memory_order_acq_rel) + 1 == pieces) {
        std::lock_guard<std::mutex> lock(mu_);  // the owner may be about to sleep
        done_.notify_one();
      }
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int max_threads, int64_t job_bytes,
                             const std::function<void(int64_t, int64_t)>& fn) {
  ScopedFlushDenormals flush;
  const int parts = static_cast<int>(std::min<int64_t>({n, max_threads, threads()}));
  std::unique_lock<std::mutex> owner(use_mu_, std::defer_lock);
  if (parts <= 1 || !owner.try_lock()) {
    if (n > 0) fn(0, n);
    return;
  }
  const int pieces = static_cast<int>(std::min<int64_t>(n, int64_t{parts} * kPiecesPerThread));
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Before the claim words name this job, so a claim that succeeds sees them.
    n_ = n;
    pieces_ = pieces;
    active_ = parts;
    fn_ = &fn;
    owner_cpu_ = CurrentCpu();
    long_job_ = job_bytes >= kLongJobBytes;
    done_pieces_.store(0, std::memory_order_relaxed);
    generation = ++generation_;
    // Thread t's share: pieces [pieces * t / parts, pieces * (t + 1) / parts); the
    // threads not taking part get an empty one.
    for (int t = 0; t < static_cast<int>(claims_.size()); ++t) {
      const int64_t first = t < parts ? int64_t{pieces} * t / parts : 0;
      const int64_t limit = t < parts ? int64_t{pieces} * (t + 1) / parts : 0;
      claims_[t].value.store(
          ClaimWord(generation, static_cast<uint64_t>(limit), static_cast<uint64_t>(first)),
          std::memory_order_release);
    }
    published_.store(generation, std::memory_order_release);
  }
  wake_.notify_all();
  RunPieces(0, generation);
  // Every piece is claimed; wait for those still running on workers (none, usually).
  const auto done = [&] { return done_pieces_.load(std::memory_order_acquire) == pieces; };
  if (!SpinUntil(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, done);
  }
}

}  // namespace normd::kernels::cpu
