// docs/semantics.md's rule on the statistics of the channel ops, which the output checks
// cannot see (their F32 rule is looser): cpu::RunMoments (contiguous runs: channels-first)
// and cpu::ColumnMoments (the columns of a block: channels-last) put the mean within
// 2^-20 sigma and M2 within 2^-19 relative (the inverse scale within 2^-20) of a float64
// evaluation, on random, offset and adversarial data, for every SIMD target. The data
// include leading rows far from the rest, which the fp32 sums' guard must send to the
// double sums, and a first element far out, which the double sums' guard must send to two
// passes. With `f64` (BatchNorm where its mean needs it) the statistics are held to double's
// own bounds. Naive fp32 sums are held to the same check and must fail it.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/channel_norm_simd.h"
#include "kernels/cpu/stats.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ForEachTarget;

struct Moments {
  double mean = 0, m2 = 0;
};

// Float64 (long double) two-pass moments of n values at stride apart.
Moments Reference(const Buffer& x, int64_t start, int64_t n, int64_t stride) {
  long double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x.at(start + i * stride);
  const long double mean = sum / n;
  long double m2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const long double d = x.at(start + i * stride) - mean;
    m2 += d * d;
  }
  return {static_cast<double>(mean), static_cast<double>(m2)};
}

// Empty when got meets the rule against ref (mean within mean_tol sigma, M2 within m2_tol
// relative; exact where sigma is 0).
std::string Error(const Moments& got, const Moments& ref, int64_t n, double mean_tol,
                  double m2_tol) {
  const double sigma = std::sqrt(ref.m2 / static_cast<double>(n));
  std::string error;
  if (!(std::fabs(got.mean - ref.mean) <= mean_tol * sigma)) {
    error = absl::StrCat("mean ", got.mean, " vs ", ref.mean, " (sigma ", sigma, ")");
  }
  if (!(std::fabs(got.m2 - ref.m2) <= m2_tol * ref.m2)) {
    absl::StrAppend(&error, error.empty() ? "" : "; ", "M2 ", got.m2, " vs ", ref.m2,
                    ", relative error ", std::fabs(got.m2 - ref.m2) / ref.m2);
  }
  return error;
}

struct Case {
  std::string name;
  // Value of element `row` of a column (or run) of `rows`.
  std::function<float(std::mt19937_64&, int64_t row, int64_t rows)> value;
};

std::vector<Case> Cases() {
  const auto normal = [](float mean, float sd) {
    return [=](std::mt19937_64& rng, int64_t, int64_t) {
      return std::normal_distribution<float>(mean, sd)(rng);
    };
  };
  return {
      {"N(0.5, 2)", normal(0.5f, 2.0f)},
      {"mean 1e4 var 1", normal(1e4f, 1.0f)},
      {"mean -3e3 sd 1e-2", normal(-3e3f, 1e-2f)},
      {"|x| ~ 3000", normal(0.0f, 3000.0f)},
      // The shifts of the fp32 sums come from the leading 64 rows of a block (128 elements
      // of a run): 10 sigma off, they fail that guard.
      {"leading rows +10",
       [](std::mt19937_64& rng, int64_t row, int64_t) {
         return std::normal_distribution<float>(0.5f, 1.0f)(rng) + (row < 128 ? 10.0f : 0.0f);
       }},
      // The same past the guard, built so that it matters: c = x - shift rounds the same
      // way in every trailing row (by 0.9 of the half ulp at 16400), an error of 1.3 times
      // 2^-20 sigma in the mean of fp32 sums over 65536 rows that it let through.
      {"leading rows 16400, then 0.487375",
       [](std::mt19937_64&, int64_t row, int64_t) { return row < 128 ? 16400.0f : 0.48737499f; }},
      {"ramp from 1000", [](std::mt19937_64&, int64_t row,
                            int64_t) { return 1000.0f + 0.001f * static_cast<float>(row); }},
      // The double sums' shift is the first element: 1e4 sigma out, it fails theirs.
      {"spike at the first element",
       [](std::mt19937_64& rng, int64_t row, int64_t) {
         return row == 0 ? 1e4f : std::normal_distribution<float>(0.5f, 1.0f)(rng);
       }},
      {"constant 0.1", [](std::mt19937_64&, int64_t, int64_t) { return 0.1f; }},
  };
}

// docs/semantics.md's bounds for fp32 statistics, and double's (shifted_sums-inl.h).
constexpr double kMeanTol = 0x1p-20, kM2Tol = 0x1p-19;
constexpr double kF64MeanTol = 0x1p-30, kF64M2Tol = 0x1p-25;

TEST(ChannelStatisticsTest, ColumnMomentsMeetTheRule) {
  ForEachTarget([] {
    std::mt19937_64 rng(21);
    struct Shape {
      int64_t rows, cols;
    };
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (Shape sh : {Shape{1, 5}, Shape{9, 16}, Shape{4097, 67}, Shape{70000, 3}}) {
        for (const Case& c : Cases()) {
          std::vector<float> values(sh.rows * sh.cols);
          for (int64_t r = 0; r < sh.rows; ++r) {
            for (int64_t k = 0; k < sh.cols; ++k)
              values[r * sh.cols + k] = c.value(rng, r, sh.rows);
          }
          const Buffer x = Buffer::Of(t, values);
          for (bool f64 : {false, true}) {
            std::vector<double> mean(sh.cols), m2(sh.cols);
            cpu::ColumnMoments(t, x.bytes.data(), sh.rows, sh.cols, f64, mean.data(), m2.data());
            for (int64_t k = 0; k < sh.cols; ++k) {
              EXPECT_EQ(Error({mean[k], m2[k]}, Reference(x, k, sh.rows, sh.cols), sh.rows,
                              f64 ? kF64MeanTol : kMeanTol, f64 ? kF64M2Tol : kM2Tol),
                        "")
                  << c.name << ", " << DTypeName(t) << ", " << sh.rows << "x" << sh.cols
                  << ", column " << k << (f64 ? ", f64" : "");
            }
          }
        }
      }
    }
  });
}

TEST(ChannelStatisticsTest, RunMomentsMeetTheRule) {
  ForEachTarget([] {
    std::mt19937_64 rng(22);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (int64_t n : {1, 7, 4097, 65536, 140000}) {
        for (const Case& c : Cases()) {
          std::vector<float> values(n);
          for (int64_t i = 0; i < n; ++i) values[i] = c.value(rng, i, n);
          const Buffer x = Buffer::Of(t, values);
          for (bool f64 : {false, true}) {
            Moments got;
            cpu::RunMoments(t, x.bytes.data(), n, f64, &got.mean, &got.m2);
            EXPECT_EQ(Error(got, Reference(x, 0, n, 1), n, f64 ? kF64MeanTol : kMeanTol,
                            f64 ? kF64M2Tol : kM2Tol),
                      "")
                << c.name << ", " << DTypeName(t) << ", n " << n << (f64 ? ", f64" : "");
          }
        }
      }
    }
  });
}

// The check can fail: fp32 sums of x and x^2 down a column miss it on offset data.
TEST(ChannelStatisticsTest, NaiveFp32SumsFailTheRule) {
  std::mt19937_64 rng(23);
  const int64_t rows = 4097;
  const Buffer x = Buffer::Of(DType::kF32, normd::testing::RandomValues(rng, rows, 1e4f, 1.0f));
  float sum = 0, squares = 0;
  for (int64_t r = 0; r < rows; ++r) {
    sum += x.at(r);
    squares += x.at(r) * x.at(r);
  }
  const double mean = sum / rows;
  const Moments naive{mean, static_cast<double>(squares) - rows * mean * mean};
  EXPECT_NE(Error(naive, Reference(x, 0, rows, 1), rows, kMeanTol, kM2Tol), "");
}

// BatchNorm's mean is an output held to the F32 rule, 1e-5 * (1 + |mean|): fp32 statistics
// serve it while sigma is within about ten times 1 + |mean|, not beyond, nor for NaN.
TEST(ChannelStatisticsTest, Fp32MeanSufficesWhereTheF32RuleHolds) {
  EXPECT_TRUE(cpu::Fp32MeanSuffices(0.5, 4.0));
  EXPECT_TRUE(cpu::Fp32MeanSuffices(1e4, 1.0));
  EXPECT_TRUE(cpu::Fp32MeanSuffices(0.0, 100.0));
  EXPECT_FALSE(cpu::Fp32MeanSuffices(0.0, 3000.0 * 3000.0));
  EXPECT_FALSE(cpu::Fp32MeanSuffices(std::nan(""), 1.0));
  EXPECT_FALSE(cpu::Fp32MeanSuffices(0.0, std::nan("")));
}

}  // namespace
}  // namespace normd::kernels
