// The trimmer's rules (TrimPolicy), stepped a period at a time: trims in the periods after
// requests released memory, none while requests recycle at least as much as the arenas
// hold free, trims when the arenas' free bytes grow without releases, and releases
// counted across quiet periods.
#include "server/memory_trim.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace normd::server {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Whether each of `periods` periods with the same releases and free bytes trimmed; the
// free bytes after a trim are `after`.
std::vector<bool> Steps(TrimPolicy* policy, int periods, int64_t released, int64_t free_bytes,
                        int64_t after) {
  std::vector<bool> trims;
  for (int i = 0; i < periods; ++i) {
    const bool trim = policy->Tick(released, free_bytes);
    if (trim) policy->Trimmed(after);
    trims.push_back(trim);
  }
  return trims;
}

TEST(TrimPolicyTest, TrimsForFivePeriodsAfterReleasesThenStops) {
  TrimPolicy policy(kMiB, 0);
  // Releases beside much more free memory than they recycle: trimmed every period, as
  // after a burst.
  EXPECT_EQ(Steps(&policy, 3, 2 * kMiB, 100 * kMiB, 0), std::vector<bool>(3, true));
  // Quiet: the last period with releases was the first of five trims; four more, then none.
  std::vector<bool> want(TrimPolicy::kTrailingPeriods - 1, true);
  want.push_back(false);
  want.push_back(false);
  EXPECT_EQ(Steps(&policy, 6, 0, 0, 0), want);
}

TEST(TrimPolicyTest, NoTrimWhileRequestsRecycleWhatTheArenasHold) {
  TrimPolicy policy(kMiB, 0);
  // 64 MiB chunked calls: gigabytes released a period beside tens of MiB free.
  EXPECT_EQ(Steps(&policy, 20, 3000 * kMiB, 40 * kMiB, 40 * kMiB), std::vector<bool>(20, false));
  // The load stops: five trailing trims return what it left.
  std::vector<bool> want(TrimPolicy::kTrailingPeriods, true);
  want.push_back(false);
  EXPECT_EQ(Steps(&policy, 6, 0, 0, 0), want);
}

TEST(TrimPolicyTest, LightLoadBesideMuchFreeMemoryStillTrims) {
  TrimPolicy policy(kMiB, 0);
  // A burst left 500 MiB free; small requests go on releasing 32 MiB a period: trimmed.
  EXPECT_EQ(Steps(&policy, 4, 32 * kMiB, 500 * kMiB, 500 * kMiB), std::vector<bool>(4, true));
  // Once the trims brought the free bytes under what the load recycles, they stop.
  EXPECT_EQ(Steps(&policy, 4, 32 * kMiB, 8 * kMiB, 8 * kMiB), std::vector<bool>(4, false));
}

TEST(TrimPolicyTest, FreeBytesGrowingWithoutReleasesTrims) {
  TrimPolicy policy(kMiB, 10 * kMiB);
  EXPECT_FALSE(policy.Tick(0, 10 * kMiB));
  EXPECT_FALSE(policy.Tick(0, 10 * kMiB + kMiB));  // growth of min_released: not more
  EXPECT_TRUE(policy.Tick(0, 12 * kMiB));          // beyond it
  policy.Trimmed(12 * kMiB);                       // trimmed chunks stay counted as free
  EXPECT_FALSE(policy.Tick(0, 12 * kMiB));
  EXPECT_TRUE(policy.Tick(0, 14 * kMiB));
}

TEST(TrimPolicyTest, SmallReleasesAddUpAcrossPeriods) {
  TrimPolicy policy(kMiB, 10 * kMiB);
  EXPECT_FALSE(policy.Tick(kMiB / 2, 10 * kMiB));
  EXPECT_TRUE(policy.Tick(kMiB / 2, 10 * kMiB));  // together min_released: trailing trims
}

}  // namespace
}  // namespace normd::server
