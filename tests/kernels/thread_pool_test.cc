// The pool covers every index once, a worker woken onto its caller's CPU lets the caller
// work (a yield) or moves off that CPU (ScopedMoveOffCpu), the backend gives bit-identical
// results on one thread and on all of them, and denormals are flushed as documented.
#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_move.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/kernels/reference.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::RandomValues;

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  cpu::ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 5, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << n << " " << i;
  }
}

// Pieces are claimed by whichever thread is free, but never by more threads than asked.
TEST(ThreadPoolTest, NoMoreThreadsThanAsked) {
  cpu::ThreadPool pool(4);
  for (int k = 0; k < 10; ++k) {
    std::mutex mu;
    std::set<std::thread::id> ran;
    std::vector<std::atomic<int>> hits(1000);
    pool.ParallelFor(1000, 2, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
      // Slow pieces: every worker that wakes finds pieces left to claim.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::lock_guard<std::mutex> lock(mu);
      ran.insert(std::this_thread::get_id());
    });
    EXPECT_LE(ran.size(), 2u);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(hits[i].load(), 1) << k << " " << i;
  }
}

// Back-to-back jobs: a worker still finishing, or waking late for, one job never runs a
// piece of another with the first job's range or function.
TEST(ThreadPoolTest, BackToBackJobsKeepTheirPieces) {
  cpu::ThreadPool pool(3);
  for (int k = 0; k < 2000; ++k) {
    const int64_t n = 1 + k % 37;
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 3, [&](int64_t b, int64_t e) {
      ASSERT_LE(e, n);
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << k << " " << i;
  }
}

TEST(ThreadPoolTest, ConcurrentCallersRunInline) {
  cpu::ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        pool.ParallelFor(64, 2, [&](int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4 * 200 * 64);
}

#if defined(__linux__)
// A worker woken onto the CPU its caller runs on hands that CPU back instead of preempting
// the caller and running the whole job itself. Confining the process to one CPU makes that
// placement certain; the calls are 2 ms apart, so the worker has gone to sleep each time.
// Without the yield the caller ran no piece of every other call (10 of 20, six runs), the
// worker having preempted it; with it, 20 of 20 (six runs).
// Another process taking the CPU at a call's start can still hand the worker all of it,
// hence three quarters rather than all, and up to three sets of 20 calls: one set at three
// quarters passes. A compile beside it once brought a set to 12 of 20 (the fifty-ninth
// session's CI run); without the yield every set stays near half (8-9 of 20, checked).
// The calls of a set in which the caller ran a piece, of 20, on one CPU.
int CallerWorkedOnOneCpu() {
  struct RestoreAffinity {
    cpu_set_t saved{};  // empty (refused by sched_setaffinity) unless read below
    ~RestoreAffinity() { sched_setaffinity(0, sizeof(saved), &saved); }
  } restore;
  if (sched_getaffinity(0, sizeof(restore.saved), &restore.saved) != 0) {
    ADD_FAILURE() << "sched_getaffinity";
    return 0;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) {
    ADD_FAILURE() << "sched_setaffinity";
    return 0;
  }
  int caller_worked = 0;
  cpu::ThreadPool pool(2);  // the worker inherits the one-CPU mask
  for (int k = 0; k < 20; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> by_caller{0};
    std::vector<std::atomic<int>> hits(64);
    pool.ParallelFor(64, 2, [&](int64_t b, int64_t e) {
      // ~20 us a piece: long enough for the worker's wake-up to land mid-job.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
      for (int64_t i = b; i < e; ++i) hits[i]++;
      if (std::this_thread::get_id() == caller) by_caller++;
    });
    for (int i = 0; i < 64; ++i) EXPECT_EQ(hits[i].load(), 1) << k << " " << i;
    caller_worked += by_caller.load() > 0;
  }
  return caller_worked;
}

TEST(ThreadPoolTest, WorkerWokenOnTheCallersCpuLetsTheCallerWork) {
  std::vector<int> sets;
  for (int set = 0; set < 3; ++set) {
    sets.push_back(CallerWorkedOnOneCpu());
    if (sets.back() >= 15) return;
  }
  ADD_FAILURE() << "calls in which the caller ran a piece, of 20, in each of three sets: "
                << sets[0] << ", " << sets[1] << ", " << sets[2] << " (15 wanted in one)";
}
#endif

#if defined(__linux__)
// The pool's worker, woken onto its caller's CPU, moves itself off that CPU
// (ScopedMoveOffCpu): the move happens before the constructor returns, and the mask comes
// back whole, so that the worker may run anywhere again.
TEST(ScopedMoveOffCpuTest, MovesToAnotherCpuAndGivesTheMaskBack) {
  cpu_set_t before;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof(before), &before));
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "this process may run on one CPU only";
  for (int k = 0; k < 20; ++k) {
    const int cpu = sched_getcpu();
    ASSERT_TRUE(CPU_ISSET(cpu, &before));
    {
      cpu::ScopedMoveOffCpu move(cpu);
      ASSERT_TRUE(move.moved());
      EXPECT_NE(sched_getcpu(), cpu) << k;
      cpu_set_t during;
      ASSERT_EQ(0, sched_getaffinity(0, sizeof(during), &during));
      EXPECT_FALSE(CPU_ISSET(cpu, &during));
      EXPECT_EQ(CPU_COUNT(&during), CPU_COUNT(&before) - 1);
    }
    cpu_set_t after;
    ASSERT_EQ(0, sched_getaffinity(0, sizeof(after), &after));
    EXPECT_TRUE(CPU_EQUAL(&before, &after)) << k;
  }
}

// With no other CPU to go to, nothing changes (the pool's worker then yields instead).
TEST(ScopedMoveOffCpuTest, StaysWhereNoOtherCpuIsAllowed) {
  cpu_set_t saved;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof(saved), &saved));
  const int cpu = sched_getcpu();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
  {
    cpu::ScopedMoveOffCpu move(cpu);
    EXPECT_FALSE(move.moved());
    EXPECT_EQ(sched_getcpu(), cpu);
  }
  cpu_set_t after;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof(after), &after));
  EXPECT_TRUE(CPU_EQUAL(&one, &after));
  EXPECT_FALSE(cpu::ScopedMoveOffCpu(-1).moved());
  ASSERT_EQ(0, sched_setaffinity(0, sizeof(saved), &saved));
}
#endif

TEST(ThreadPoolTest, ResultsDoNotDependOnThreadCount) {
  CpuBackendOptions many;
  many.threads = 4;
  many.min_parallel_bytes = 0;
  CpuBackend parallel(many), single(CpuBackendOptions{1});
  std::mt19937_64 rng(5);
  Buffer x = Buffer::Of(DType::kBF16, RandomValues(rng, 37 * 513));
  Buffer w = Buffer::Of(DType::kF32, RandomValues(rng, 513, 1, 0.1f));
  Buffer b = Buffer::Of(DType::kF32, RandomValues(rng, 513));
  Buffer y1(DType::kBF16, 37 * 513), y2(DType::kBF16, 37 * 513);
  RowNormArgs a;
  a.kind = RowNormKind::kLayer;
  a.rows = 37;
  a.cols = 513;
  a.x = x.view();
  a.weight = w.view();
  a.bias = b.view();
  a.eps = 1e-5;
  a.y = y1.view_mut();
  ASSERT_TRUE(single.RowNorm(a).ok());
  a.y = y2.view_mut();
  ASSERT_TRUE(parallel.RowNorm(a).ok());
  EXPECT_EQ(0, std::memcmp(y1.bytes.data(), y2.bytes.data(), y1.bytes.size()));

  for (Layout layout : {Layout::kChannelsFirst, Layout::kChannelsLast}) {
    Buffer cx = Buffer::Of(DType::kF32, RandomValues(rng, 6 * 8 * 77));
    Buffer c1(DType::kF32, 6 * 8 * 77), c2(DType::kF32, 6 * 8 * 77);
    BatchNormArgs bn;
    bn.n = 6;
    bn.c = 8;
    bn.s = 77;
    bn.layout = layout;
    bn.x = cx.view();
    bn.training = true;
    bn.y = c1.view_mut();
    ASSERT_TRUE(single.BatchNorm(bn).ok());
    bn.y = c2.view_mut();
    ASSERT_TRUE(parallel.BatchNorm(bn).ok());
    // Channels-last BatchNorm merges per-thread partial statistics in a different order,
    // so equality is to the accuracy rule rather than bit for bit.
    normd::testing::ExpectAllMatch(c2, reference::BatchNorm(bn).y, "parallel batch_norm");
  }
}

TEST(ThreadPoolTest, DenormalInputsCountAsZero) {
  // FTZ/DAZ (thread_pool.h): an input below 2^-126 is zero, so this row is [0, 0, 1, 2].
  Buffer x = Buffer::Of(DType::kF32, {1e-40f, -1e-41f, 1.0f, 2.0f});
  Buffer zeroed = Buffer::Of(DType::kF32, {0, 0, 1.0f, 2.0f});
  Buffer y(DType::kF32, 4);
  RowNormArgs a;
  a.kind = RowNormKind::kRms;
  a.rows = 1;
  a.cols = 4;
  a.x = x.view();
  a.eps = 1e-6;
  a.y = y.view_mut();
  CpuBackend cpu;
  ASSERT_TRUE(cpu.RowNorm(a).ok());
  EXPECT_EQ(y.at(0), 0.0f);
  EXPECT_EQ(y.at(1), 0.0f);
  a.x = zeroed.view();
  normd::testing::ExpectAllMatch(y, reference::RowNorm(a).y, "flushed row");
}

}  // namespace
}  // namespace normd::kernels
