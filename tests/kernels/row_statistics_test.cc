// docs/semantics.md's rule on the statistics themselves, which the output checks cannot see
// (the F32 output rule, 1e-5 relative, is looser than it): the CPU kernel's mean within
// 2^-20 sigma and its inverse scale within 2^-20 relative of the float64 reference, on
// random and offset rows, for every SIMD target. A naive fp32 kernel (raw sums of x and x^2)
// is held to the same check and must fail it, so the check can fail.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/cpu/row_norm_simd.h"
#include "normd/kernels/reference.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ForEachTarget;
using normd::testing::RandomValues;

constexpr double kTolerance = 0x1p-20;

// Empty when (mean, scale) meet the rule against the reference's statistics of the row.
std::string StatisticsError(const RowNormArgs& a, int64_t row, double mean, double scale) {
  const reference::RowStats ref = reference::RowStatistics(a, row);
  std::string error;
  if (a.kind == RowNormKind::kLayer && !(std::fabs(mean - ref.mean) <= kTolerance * ref.sigma)) {
    error = absl::StrCat("mean ", mean, " vs ", ref.mean, " (sigma ", ref.sigma, ")");
  }
  if (!(std::fabs(scale - ref.inverse_scale) <= kTolerance * ref.inverse_scale)) {
    absl::StrAppend(&error, error.empty() ? "" : "; ", "inverse scale ", scale, " vs ",
                    ref.inverse_scale, ", relative error ",
                    std::fabs(scale - ref.inverse_scale) / ref.inverse_scale);
  }
  return error;
}

// What a naive fp32 kernel computes: one pass of fp32 sums of x and x^2, the variance as
// E[x^2] - E[x]^2.
void NaiveStatistics(const RowNormArgs& a, int64_t row, double* mean, double* scale) {
  float sum = 0, squares = 0;
  for (int64_t i = 0; i < a.cols; ++i) {
    const float v = a.x.at(row * a.cols + i);
    sum += v;
    squares += v * v;
  }
  const float n = static_cast<float>(a.cols);
  const float m = sum / n;
  const float ms = squares / n;
  const float var = a.kind == RowNormKind::kLayer ? ms - m * m : ms;
  *mean = a.kind == RowNormKind::kLayer ? m : 0.0f;
  *scale = 1.0f / std::sqrt(var + static_cast<float>(a.eps));
}

struct Row {
  std::string name;
  std::vector<float> values;
};

std::vector<Row> Rows(int64_t cols) {
  std::mt19937_64 rng(11);
  std::vector<float> ramp(cols);
  for (int64_t i = 0; i < cols; ++i) ramp[i] = 1000.0f + 0.001f * static_cast<float>(i);
  return {{"N(0.5, 2)", RandomValues(rng, cols, 0.5f, 2.0f)},
          {"mean 1e4 var 1", RandomValues(rng, cols, 1e4f, 1.0f)},
          {"mean -3e3 sd 1e-2", RandomValues(rng, cols, -3e3f, 1e-2f)},
          {"|x| ~ 3000", RandomValues(rng, cols, 0.0f, 3000.0f)},
          {"tiny", RandomValues(rng, cols, 0.0f, 1e-3f)},
          {"ramp from 1000", ramp}};
}

RowNormArgs Args(RowNormKind kind, const Buffer& x, int64_t cols) {
  RowNormArgs a;
  a.kind = kind;
  a.rows = 1;
  a.cols = cols;
  a.x = x.view();
  a.eps = kind == RowNormKind::kLayer ? kDefaultLayerNormEps
                                      : (kind == RowNormKind::kRms ? kDefaultRmsNormEps : 0.0);
  return a;
}

TEST(RowStatisticsTest, KernelMeetsTheStatisticsRule) {
  ForEachTarget([] {
    for (RowNormKind kind : {RowNormKind::kLayer, RowNormKind::kRms, RowNormKind::kL2}) {
      for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
        for (int64_t cols : {1, 7, 64, 4097, 65536}) {
          for (const Row& r : Rows(cols)) {
            const Buffer x = Buffer::Of(t, r.values);
            const RowNormArgs a = Args(kind, x, cols);
            double mean, scale;
            cpu::RowStatistics(a, 0, &mean, &scale);
            EXPECT_EQ(StatisticsError(a, 0, mean, scale), "")
                << r.name << ", " << DTypeName(t) << ", " << cols << " columns, kind "
                << static_cast<int>(kind);
          }
        }
      }
    }
  });
}

// Squares beyond fp32's range, both ways: the kernel's fp32 block sums would overflow to
// Inf or flush to zero; it redoes such rows in double. (F16 cannot hold these values.)
TEST(RowStatisticsTest, SquaresOutsideFp32RangeAreRedoneInDouble) {
  ForEachTarget([] {
    std::mt19937_64 rng(12);
    for (DType t : {DType::kF32, DType::kBF16}) {
      for (float sd : {1e20f, 3e-20f}) {
        for (RowNormKind kind : {RowNormKind::kLayer, RowNormKind::kRms, RowNormKind::kL2}) {
          const int64_t cols = 4097;
          const Buffer x = Buffer::Of(t, RandomValues(rng, cols, 0.0f, sd));
          RowNormArgs a = Args(kind, x, cols);
          a.eps = 0;
          double mean, scale;
          cpu::RowStatistics(a, 0, &mean, &scale);
          EXPECT_EQ(StatisticsError(a, 0, mean, scale), "")
              << "sd " << sd << ", " << DTypeName(t) << ", kind " << static_cast<int>(kind);
        }
      }
    }
  });
}

// With a residual added the statistics are h's, h = x + alpha * skip. A large f16/bf16 row
// keeps no fp32 copy of h from 4096 columns (its epilogue forms h again), so the rare second
// passes widen x and skip again: rows whose first block is far from the rest (LayerNorm's
// centred pass) and rows whose squares leave fp32's range (redone in double) take them.
TEST(RowStatisticsTest, KernelMeetsItWithAResidualAdded) {
  ForEachTarget([] {
    std::mt19937_64 rng(4);
    struct Case {
      std::string name;
      std::vector<float> x, skip;
      double eps;
    };
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (int64_t cols : {1000, 4097, 65536}) {
        std::vector<Case> cases;
        // x's offset cancelled by skip's (alpha 0.5).
        cases.push_back({"x 1e3, skip -2e3", RandomValues(rng, cols, 1e3f, 1.0f),
                         RandomValues(rng, cols, -2e3f, 1.0f), -1});
        std::vector<float> jump = RandomValues(rng, cols, 1e3f, 1.0f);
        for (int64_t i = 0; i < 256; ++i) jump[i] += 3e3f;
        cases.push_back(
            {"first 256 elements of x 3e3 off", jump, RandomValues(rng, cols, -2e3f, 1.0f), -1});
        if (t != DType::kF16) {  // F16 cannot hold these
          for (float sd : {1e20f, 3e-20f}) {
            cases.push_back({absl::StrCat("x and skip sd ", sd), RandomValues(rng, cols, 0, sd),
                             RandomValues(rng, cols, 0, sd), 0});
          }
        }
        for (const Case& c : cases) {
          const Buffer x = Buffer::Of(t, c.x);
          const Buffer skip = Buffer::Of(t, c.skip);
          for (RowNormKind kind : {RowNormKind::kLayer, RowNormKind::kRms}) {
            RowNormArgs a = Args(kind, x, cols);
            a.residual = ResidualPlacement::kAddThenNorm;
            a.skip = skip.view();
            a.alpha = 0.5;
            if (c.eps >= 0) a.eps = c.eps;
            double mean, scale;
            cpu::RowStatistics(a, 0, &mean, &scale);
            EXPECT_EQ(StatisticsError(a, 0, mean, scale), "")
                << c.name << ", " << DTypeName(t) << ", " << cols << " columns, kind "
                << static_cast<int>(kind);
          }
        }
      }
    }
  });
}

// LayerNorm's statistics come from one pass of sums of x - shift, shift the mean of the
// row's first block, where those are exact enough (OnePassMoments), else from a centred
// second pass. Rows that send it down the second path: a first block far from the rest
// (a shift many sigma from the mean), a constant row (no spread), a spread that underflows
// fp32's squares. Rows shorter than a block, and a block's worth of outliers, take the
// first path with the shift near the mean.
TEST(RowStatisticsTest, LayerNormOnePassFallsBackWhereItWouldNotBeExact) {
  ForEachTarget([] {
    std::mt19937_64 rng(21);
    for (DType t : {DType::kF32, DType::kBF16}) {
      for (int64_t cols : {100, 4097, 65536}) {
        std::vector<Row> rows;
        for (float jump : {1e3f, -3e4f}) {
          std::vector<float> v = RandomValues(rng, cols, 1e4f, 1.0f);
          for (int64_t i = 0; i < std::min<int64_t>(cols, 8); ++i) v[i] += jump;
          rows.push_back({absl::StrCat("first 8 elements ", jump, " off"), v});
          v = RandomValues(rng, cols, 1e4f, 1.0f);
          for (int64_t i = 0; i < std::min<int64_t>(cols, 256); ++i) v[i] += jump;
          rows.push_back({absl::StrCat("first 256 elements ", jump, " off"), v});
        }
        rows.push_back({"constant 7", std::vector<float>(cols, 7.0f)});
        rows.push_back({"constant 1e4", std::vector<float>(cols, 1e4f)});
        std::vector<float> step(cols, 1.0f);
        for (int64_t i = cols / 2; i < cols; ++i) step[i] = 2.0f;
        rows.push_back({"two halves", step});
        for (const Row& r : rows) {
          const Buffer x = Buffer::Of(t, r.values);
          RowNormArgs a = Args(RowNormKind::kLayer, x, cols);
          double mean, scale;
          cpu::RowStatistics(a, 0, &mean, &scale);
          EXPECT_EQ(StatisticsError(a, 0, mean, scale), "")
              << r.name << ", " << DTypeName(t) << ", " << cols << " columns";
        }
      }
    }
  });
}

// The one-loop pass of large rows (fused_rows-inl.h) forms the next row's sums beside this
// row's epilogue, and the two passes form a row's sums where the loop leaves it (the first
// row of a thread's range, a row not whole blocks): both must give the same bits, or a
// row's output would depend on where a thread's range began. An ulp's change in the sums
// (a tree reassociated) does not show in f16/bf16 outputs, so the sums are compared here.
TEST(RowStatisticsTest, OneLoopPassGivesLoadRowsSumsToTheBit) {
  int compared = 0, compared_partial = 0;
  ForEachTarget([&] {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool moments : {true, false}) {
        // 65536: the long rows (kFusedLongRowBytes, row_plan.h).
        for (int64_t cols : {1024, 1536, 4096, 65536}) {
          const std::vector<Row> rows = Rows(cols);
          const Buffer x = Buffer::Of(t, rows[0].values);
          Buffer y(t, cols);
          for (const Row& r : rows) {
            const Buffer next = Buffer::Of(t, r.values);
            double fused[3], loaded[3];
            // RMSNorm's partial statistics: the first quarter (whole blocks) or 100 elements
            // (not: the pass declines).
            for (int64_t m : {cols, cols / 4, int64_t{100}}) {
              if (moments && m != cols) continue;
              if (!cpu::OneLoopSums(t, moments, x.view().data, next.view().data, cols, m,
                                    y.view_mut().data, fused, loaded)) {
                continue;
              }
              ++compared;
              if (m != cols) ++compared_partial;
              for (int k = 0; k < 3; ++k) {
                EXPECT_EQ(std::bit_cast<uint64_t>(fused[k]), std::bit_cast<uint64_t>(loaded[k]))
                    << "sum " << k << ": " << fused[k] << " vs " << loaded[k] << "; " << r.name
                    << ", " << DTypeName(t) << ", " << cols << " columns (" << m
                    << " in the statistic), moments " << moments;
              }
            }
          }
        }
      }
    }
  });
  // The pass runs on every x86 target from AVX2 up (narrower ones take the two passes
  // only): wherever this build has one and the CPU runs it, something was compared.
  bool wide = false;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    wide = wide || (HWY_ARCH_X86 && target <= HWY_AVX2);
  }
  if (wide) {
    EXPECT_GT(compared, 0);
    EXPECT_GT(compared_partial, 0);
  }
}

// The control: the same check fails a naive fp32 kernel, so the passes above are the
// kernel's and not those of a check that cannot fail.
TEST(RowStatisticsTest, NaiveFp32KernelFailsTheCheckOnOffsetRows) {
  for (int64_t cols : {4096, 65536}) {
    std::mt19937_64 rng(9);
    const Buffer offset = Buffer::Of(DType::kF32, RandomValues(rng, cols, 1e4f, 1.0f));
    const RowNormArgs a = Args(RowNormKind::kLayer, offset, cols);
    double mean, scale;
    NaiveStatistics(a, 0, &mean, &scale);
    EXPECT_NE(StatisticsError(a, 0, mean, scale), "") << cols << " columns";
  }
  // fp32 raw sums of squares are off by more than 2^-20 on long rows even without offset
  // (RMSNorm): the sequential rounding error grows with the length.
  std::mt19937_64 rng(10);
  const Buffer plain = Buffer::Of(DType::kF32, RandomValues(rng, 65536, 0.5f, 2.0f));
  const RowNormArgs a = Args(RowNormKind::kRms, plain, 65536);
  double mean, scale;
  NaiveStatistics(a, 0, &mean, &scale);
  EXPECT_NE(StatisticsError(a, 0, mean, scale), "");
}

}  // namespace
}  // namespace normd::kernels
