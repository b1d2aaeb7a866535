// The trimmer's rules (TrimPolicy), stepped a period at a time: no trims while requests
// reuse what the arenas hold (a steady load, a caller every other period), a burst's
// memory trimmed once its releases leave the window (also under a lighter load that goes
// on), trims when resident free memory grows without releases, none for what a trim
// cannot return. And the estimate the trimmer feeds it, ResidentFreeHeapBytes, against
// memory this test frees and trims.
#include "server/memory_trim.h"

#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/sanitized.h"

namespace normd::server {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int kWindow = TrimPolicy::kWindowPeriods;

// Whether each of `periods` periods with the same releases and resident free bytes
// trimmed; the resident free bytes after a trim are `after`.
std::vector<bool> Steps(TrimPolicy* policy, int periods, int64_t released, int64_t resident_free,
                        int64_t after) {
  std::vector<bool> trims;
  for (int i = 0; i < periods; ++i) {
    const bool trim = policy->Tick(released, resident_free);
    if (trim) policy->Trimmed(after);
    trims.push_back(trim);
  }
  return trims;
}

std::vector<bool> TrimAt(int periods, int at) {
  std::vector<bool> want(periods, false);
  want[at] = true;
  return want;
}

TEST(TrimPolicyTest, NoTrimWhileASteadyLoadReusesWhatTheArenasHold) {
  TrimPolicy policy(kMiB);
  policy.Trimmed(2 * kMiB);
  // 4 MiB unary calls twice a period (16 MiB reserved and released) leave 10-15 MiB of
  // gRPC's slices free between calls: kept, where trimming them cost each call ~1000 page
  // faults (BENCHMARKS.md, seventy-seventh session).
  EXPECT_EQ(Steps(&policy, 20, 16 * kMiB, 15 * kMiB, 2 * kMiB), std::vector<bool>(20, false));
  // 64 MiB chunked calls: gigabytes a period beside tens of MiB free.
  EXPECT_EQ(Steps(&policy, 20, 3000 * kMiB, 40 * kMiB, 2 * kMiB), std::vector<bool>(20, false));
}

TEST(TrimPolicyTest, ACallerEveryOtherPeriodKeepsItsPages) {
  TrimPolicy policy(kMiB);
  policy.Trimmed(2 * kMiB);
  // A 4 MiB call (8 MiB reserved) every other period; between calls the arenas hold the
  // call's slices free, 5-7.5 MiB in the measurement above.
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(policy.Tick(i % 2 == 0 ? 8 * kMiB : 0, 2 * kMiB + 7 * kMiB)) << "period " << i;
  }
}

TEST(TrimPolicyTest, ABurstsMemoryIsTrimmedOnceItsReleasesLeaveTheWindow) {
  TrimPolicy policy(kMiB);
  policy.Trimmed(2 * kMiB);
  EXPECT_EQ(Steps(&policy, 5, 3000 * kMiB, 300 * kMiB, 2 * kMiB), std::vector<bool>(5, false));
  // Quiet: the burst's periods leave the window one a period; then one trim returns what
  // it left, and nothing more is due.
  EXPECT_EQ(Steps(&policy, kWindow - 1, 0, 300 * kMiB, 2 * kMiB),
            std::vector<bool>(kWindow - 1, false));
  EXPECT_TRUE(policy.Tick(0, 300 * kMiB));
  policy.Trimmed(2 * kMiB);
  EXPECT_EQ(Steps(&policy, 10, 0, 2 * kMiB, 2 * kMiB), std::vector<bool>(10, false));
}

TEST(TrimPolicyTest, ALighterLoadAfterABurstDoesNotKeepTheBurstsMemory) {
  TrimPolicy policy(kMiB);
  policy.Trimmed(2 * kMiB);
  EXPECT_EQ(Steps(&policy, 3, 3000 * kMiB, 500 * kMiB, 2 * kMiB), std::vector<bool>(3, false));
  // Small requests go on releasing 32 MiB a period beside the 500 MiB the burst left: one
  // trim once the burst's periods left the window.
  EXPECT_EQ(Steps(&policy, kWindow, 32 * kMiB, 500 * kMiB, 2 * kMiB), TrimAt(kWindow, kWindow - 1));
  // What the load reuses comes back and stays: no more trims.
  EXPECT_EQ(Steps(&policy, 10, 32 * kMiB, 20 * kMiB, 2 * kMiB), std::vector<bool>(10, false));
}

TEST(TrimPolicyTest, ResidentFreeMemoryGrowingWithoutReleasesIsTrimmed) {
  TrimPolicy policy(kMiB);
  policy.Trimmed(10 * kMiB);
  EXPECT_FALSE(policy.Tick(0, 10 * kMiB));
  EXPECT_FALSE(policy.Tick(0, 11 * kMiB));  // growth of the slack: not more
  EXPECT_TRUE(policy.Tick(0, 12 * kMiB));   // beyond it (a client's buffers, freed late)
  policy.Trimmed(10 * kMiB);
  EXPECT_FALSE(policy.Tick(0, 10 * kMiB));
}

TEST(TrimPolicyTest, WhatATrimCannotReturnIsNotTrimmedAgain) {
  TrimPolicy policy(kMiB);
  policy.Trimmed(6 * kMiB);  // arenas' tops, stacks: resident, free, and staying
  EXPECT_EQ(Steps(&policy, 10, 0, 6 * kMiB, 6 * kMiB), std::vector<bool>(10, false));
  // A lower reading lowers the floor; a trim back at the old level raises it again.
  EXPECT_FALSE(policy.Tick(0, 3 * kMiB));
  EXPECT_TRUE(policy.Tick(0, 6 * kMiB));
  policy.Trimmed(6 * kMiB);
  EXPECT_EQ(Steps(&policy, 10, 0, 6 * kMiB, 6 * kMiB), std::vector<bool>(10, false));
}

#if !NORMD_SANITIZED  // the sanitizers' allocators keep freed memory and count it apart
TEST(ResidentFreeHeapBytesTest, CountsFreedPagesUntilTrimmed) {
  // 32 MiB in 64 KiB blocks (glibc serves them from an arena), written so that they are
  // resident; every other block is freed, so that the free ones cannot merge into the
  // arena's top, which glibc would shrink at once.
  constexpr int kBlocks = 512;
  constexpr size_t kBlock = 64 << 10;
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(malloc(kBlock));
    ASSERT_NE(blocks.back(), nullptr);
    std::memset(blocks.back(), 1, kBlock);
  }
  const int64_t held = ResidentFreeHeapBytes();
  for (int i = 0; i < kBlocks; i += 2) free(blocks[i]);
  const int64_t freed = ResidentFreeHeapBytes();
  malloc_trim(0);
  const int64_t trimmed = ResidentFreeHeapBytes();
  for (int i = 1; i < kBlocks; i += 2) free(blocks[i]);
  // 16 MiB freed; a trim returns the whole pages inside each free chunk (15 of its 16).
  EXPECT_GE(freed - held, 15 * kMiB) << held << " " << freed;
  EXPECT_GE(freed - trimmed, 14 * kMiB) << freed << " " << trimmed;
}
#endif

}  // namespace
}  // namespace normd::server
