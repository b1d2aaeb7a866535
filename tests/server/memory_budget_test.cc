// The memory budget (--max-memory): reservations, growth and release, refusals that name
// the figures, and many threads reserving at once never holding more than the limit
// together (also run under ThreadSanitizer by scripts/test-hardened.sh tsan).
#include "server/memory_budget.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normd::server {
namespace {

using ::testing::HasSubstr;

TEST(MemoryBudgetTest, ReservesGrowsAndReleases) {
  MemoryBudget budget(1000);
  absl::StatusOr<MemoryBudget::Reservation> a = budget.Reserve(600);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(budget.used(), 600);
  absl::StatusOr<MemoryBudget::Reservation> b = budget.Reserve(500);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("--max-memory"));
  EXPECT_THAT(b.status().message(), HasSubstr("needs 500 bytes, 600 of 1000"));
  EXPECT_EQ(budget.refused(), 1);

  // A growth that does not fit leaves the reservation as it was.
  EXPECT_EQ(a->Grow(500).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a->bytes(), 600);
  EXPECT_TRUE(a->Grow(400).ok());
  EXPECT_EQ(a->bytes(), 1000);
  EXPECT_EQ(budget.used(), 1000);

  // Moving hands the bytes over once; releasing twice gives them back once.
  MemoryBudget::Reservation moved = std::move(*a);
  EXPECT_EQ(a->bytes(), 0);
  EXPECT_EQ(moved.bytes(), 1000);
  moved.Release();
  moved.Release();
  EXPECT_EQ(budget.used(), 0);
  EXPECT_EQ(budget.TakeReleased(), 1000);
  EXPECT_EQ(budget.TakeReleased(), 0);
}

TEST(MemoryBudgetTest, DestroyingAReservationReleasesIt) {
  MemoryBudget budget(100);
  {
    absl::StatusOr<MemoryBudget::Reservation> r = budget.Reserve(100);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(budget.Reserve(1).ok());
  }
  EXPECT_EQ(budget.used(), 0);
  EXPECT_TRUE(budget.Reserve(100).ok());
}

TEST(MemoryBudgetTest, UnlimitedAcceptsEverythingAndStillCounts) {
  MemoryBudget budget(0);
  absl::StatusOr<MemoryBudget::Reservation> r = budget.Reserve(int64_t{1} << 50);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(budget.used(), int64_t{1} << 50);
  EXPECT_TRUE(r->Grow(1).ok());
  r->Release();
  EXPECT_EQ(budget.used(), 0);
}

TEST(MemoryBudgetTest, ManyThreadsNeverHoldMoreThanTheLimitTogether) {
  constexpr int64_t kLimit = 1 << 20;
  MemoryBudget budget(kLimit);
  std::atomic<int64_t> held{0}, peak{0}, granted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::uniform_int_distribution<int64_t> size(1, kLimit / 4);
      std::vector<MemoryBudget::Reservation> mine;
      for (int i = 0; i < 4000; ++i) {
        absl::StatusOr<MemoryBudget::Reservation> r = budget.Reserve(size(rng));
        bool grown = true;
        if (r.ok() && i % 3 == 0) grown = r->Grow(size(rng)).ok();
        if (!r.ok() || !grown) refused.fetch_add(1);
        if (r.ok()) {
          const int64_t now = held.fetch_add(r->bytes()) + r->bytes();
          int64_t p = peak.load();
          while (now > p && !peak.compare_exchange_weak(p, now)) {
          }
          granted.fetch_add(1);
          mine.push_back(std::move(*r));
        }
        // Hold up to three at a time, releasing the oldest, so the budget stays contended.
        if (mine.size() > 3 || (!mine.empty() && i % 5 == 0)) {
          held.fetch_sub(mine.front().bytes());
          mine.erase(mine.begin());
        }
      }
      for (MemoryBudget::Reservation& r : mine) held.fetch_sub(r.bytes());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(peak.load(), kLimit);
  EXPECT_GT(granted.load(), 0);
  EXPECT_GT(refused.load(), 0) << "the budget was never contended; the test proves nothing";
  EXPECT_EQ(budget.refused(), refused.load());
  EXPECT_EQ(held.load(), 0);
  EXPECT_EQ(budget.used(), 0);
}

}  // namespace
}  // namespace normd::server
