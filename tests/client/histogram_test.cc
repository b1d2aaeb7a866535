// The latency histogram against exact nearest-rank percentiles of synthetic data: every
// percentile normbench reports within 1% of the exact value, on distributions that stress
// its buckets (uniform over decades, log-normal, exponential tails, constants, spikes).
#include "normd/load/histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace normd {
namespace {

int64_t ExactPercentile(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  const int64_t rank =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(p * v.size())), 1, v.size());
  return v[rank - 1];
}

void ExpectWithinOnePercent(const std::vector<int64_t>& values, const char* what) {
  LatencyHistogram h;
  for (int64_t v : values) h.Record(v);
  ASSERT_EQ(h.count(), static_cast<int64_t>(values.size()));
  for (double p : {0.0, 0.001, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0}) {
    const int64_t exact = ExactPercentile(values, p);
    const int64_t got = h.Percentile(p);
    EXPECT_LE(std::fabs(static_cast<double>(got - exact)), 0.01 * exact)
        << what << " p" << p * 100 << ": histogram " << got << ", exact " << exact;
  }
  EXPECT_EQ(h.min(), *std::min_element(values.begin(), values.end())) << what;
  EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end())) << what;
}

TEST(LatencyHistogramTest, PercentilesWithinOnePercentOfExact) {
  std::mt19937_64 rng(7);
  std::vector<int64_t> uniform, lognormal, exponential, spikes;
  std::uniform_real_distribution<double> decades(0, 7);
  std::lognormal_distribution<double> ln(6, 1.5);
  std::exponential_distribution<double> ex(1.0 / 300);
  for (int i = 0; i < 200000; ++i) {
    uniform.push_back(static_cast<int64_t>(std::pow(10, decades(rng))));
    lognormal.push_back(static_cast<int64_t>(ln(rng)));
    exponential.push_back(static_cast<int64_t>(ex(rng)) + 50);
    spikes.push_back(i % 1000 == 0 ? 5'000'000 : 120 + i % 7);
  }
  ExpectWithinOnePercent(uniform, "uniform over 7 decades");
  ExpectWithinOnePercent(lognormal, "log-normal");
  ExpectWithinOnePercent(exponential, "exponential");
  ExpectWithinOnePercent(spikes, "rare 5 s spikes");
  ExpectWithinOnePercent(std::vector<int64_t>(1000, 987654321), "constant");
  ExpectWithinOnePercent({1, 2, 3}, "three small values");
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (int64_t v = 0; v < 100000; v += 7) {
    (v % 2 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.mean(), all.mean());
  for (double p : {0.01, 0.5, 0.99}) EXPECT_EQ(a.Percentile(p), all.Percentile(p));
}

TEST(LatencyHistogramTest, EmptyAndNegative) {
  LatencyHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0);
  EXPECT_EQ(h.count(), 0);
  h.Record(-5);  // a clock step backwards counts as 0
  EXPECT_EQ(h.Percentile(0.5), 0);
  EXPECT_EQ(h.count(), 1);
}

// The check must be able to fail: a coarse reading (the bucket's lower bound of a
// 1/16-wide bucket) misses by more than 1% somewhere on the same data.
TEST(LatencyHistogramTest, TheOnePercentCheckCatchesACoarseHistogram) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> ln(6, 1.5);
  std::vector<int64_t> v;
  for (int i = 0; i < 100000; ++i) v.push_back(static_cast<int64_t>(ln(rng)));
  bool missed = false;
  for (double p : {0.5, 0.9, 0.99}) {
    const int64_t exact = ExactPercentile(v, p);
    const int shift = std::max(0, static_cast<int>(std::log2(exact)) - 4);
    const int64_t coarse = (exact >> shift) << shift;
    missed |= std::fabs(static_cast<double>(coarse - exact)) > 0.01 * exact;
  }
  EXPECT_TRUE(missed);
}

}  // namespace
}  // namespace normd
