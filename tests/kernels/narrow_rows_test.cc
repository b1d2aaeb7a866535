// Narrow rows (RMSNorm and L2Norm without a residual, at most 256 columns, a whole
// number of vectors: QK-norm's heads) take their own kernel (kernels/cpu/narrow_rows-inl.h).
// It must give the general passes' bits, and meet the reference on adversarial rows,
// including rows whose squares leave fp32's range (the group goes the general way).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/kernels/reference.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ExpectAllMatch;
using normd::testing::ForEachTarget;
using normd::testing::RandomValues;

struct NarrowConfig {
  std::string name;
  RowNormKind kind;
  bool weight = false, bias = false;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  double weight_offset = 0;
  bool cast_before_weight = false;
  double eps = 1e-6;
};

std::vector<NarrowConfig> NarrowConfigs() {
  using K = RowNormKind;
  return {
      {"rms", K::kRms},
      {"rms_weight", K::kRms, true},
      {"rms_weight_bias", K::kRms, true, true},
      {"rms_gemma", K::kRms, true, false, EpsPlacement::kInsideSqrt, 1.0},
      {"rms_add_to_rms", K::kRms, true, false, EpsPlacement::kOutsideSqrt},
      {"rms_hf", K::kRms, true, false, EpsPlacement::kInsideSqrt, 0, true},
      {"l2", K::kL2, false, false, EpsPlacement::kInsideSqrt, 0, false, 1e-12},
      {"l2_eps_large", K::kL2, false, false, EpsPlacement::kInsideSqrt, 0, false, 1e-2},
  };
}

RowNormArgs ArgsOf(const NarrowConfig& c, int64_t rows, int64_t cols, const Buffer& x,
                   const Buffer& w, const Buffer& b, Buffer& y) {
  RowNormArgs a;
  a.kind = c.kind;
  a.rows = rows;
  a.cols = cols;
  a.x = x.view();
  if (c.weight) a.weight = w.view();
  if (c.bias) a.bias = b.view();
  a.eps = c.eps;
  a.eps_placement = c.eps_placement;
  a.weight_offset = c.weight_offset;
  a.cast_before_weight = c.cast_before_weight;
  a.y = y.view_mut();
  return a;
}

// Rows 0-3 a group, row 5 with squares beyond fp32's range and row 6 below it (bf16), row 9 zero,
// row 10 with a NaN; 11 rows: two groups of four and three single rows on one thread, other splits
// on three.
std::vector<float> NarrowRows(std::mt19937_64& rng, DType t, int64_t rows, int64_t cols) {
  std::vector<float> v = RandomValues(rng, rows * cols, 0.25f, 1.5f);
  for (float& e : v) e = e == 0.0f ? 1.0f : e;  // no -0: x + 0 * skip would make it +0
  const auto row = [&](int64_t r) { return v.begin() + r * cols; };
  if (t != DType::kF16) {
    for (auto it = row(5); it != row(6); ++it) *it *= 3e24f;
  }
  // Squares below fp32's range in f32 and bf16; f16 cannot hold such values (they would round
  // to zeros, -0 among them, which the general path's + 0 would turn into +0).
  for (auto it = row(6); it != row(7); ++it) *it *= t != DType::kF16 ? 1e-18f : 1e-4f;
  std::fill(row(9), row(10), 0.0f);
  *(row(10) + 3) = std::numeric_limits<float>::quiet_NaN();
  return v;
}

// The first element whose bits differ (NaNs equal whatever their payloads), or numel.
int64_t FirstDifference(const Buffer& a, const Buffer& b) {
  const size_t e = ElementSize(a.dtype);
  for (int64_t i = 0; i < a.numel; ++i) {
    if (std::isnan(a.at(i)) && std::isnan(b.at(i))) continue;
    if (std::memcmp(a.bytes.data() + i * e, b.bytes.data() + i * e, e) != 0) return i;
  }
  return a.numel;
}

// The same rows through the general passes: a residual add of zeros (x + 1 * 0 is x) takes
// them there, with the same sums in the same order and the same epilogue arithmetic.
TEST(NarrowRowsTest, SameBitsAsTheGeneralPasses) {
  ForEachTarget([] {
    std::mt19937_64 rng(11);
    const int64_t rows = 11;
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (const int64_t cols : {16, 64, 128, 256}) {
        const Buffer x = Buffer::Of(t, NarrowRows(rng, t, rows, cols));
        const Buffer zeros = Buffer::Of(t, std::vector<float>(rows * cols, 0.0f));
        const Buffer w = Buffer::Of(DType::kF32, RandomValues(rng, cols, 1, 0.3f));
        const Buffer b = Buffer::Of(t, RandomValues(rng, cols, 0, 0.3f));
        for (const NarrowConfig& c : NarrowConfigs()) {
          for (const int threads : {1, 3}) {
            for (const int64_t stream_bytes : {int64_t{1} << 60, int64_t{0}}) {
              CpuBackendOptions options;
              options.threads = threads;
              options.min_parallel_bytes = 0;
              options.stream_bytes = stream_bytes;
              CpuBackend cpu(options);
              Buffer narrow(t, rows * cols), general(t, rows * cols);
              ASSERT_TRUE(cpu.RowNorm(ArgsOf(c, rows, cols, x, w, b, narrow)).ok());
              RowNormArgs g = ArgsOf(c, rows, cols, x, w, b, general);
              g.residual = ResidualPlacement::kAddThenNorm;
              g.skip = zeros.view();
              g.alpha = 1;
              ASSERT_TRUE(cpu.RowNorm(g).ok());
              EXPECT_EQ(FirstDifference(narrow, general), rows * cols)
                  << c.name << " " << DTypeName(t) << " cols " << cols << " threads " << threads
                  << " stream " << (stream_bytes == 0);
            }
          }
        }
      }
    }
  });
}

// Large outputs stream where the output is vector-aligned (every row then is), else take
// plain stores: the same bytes at every offset, on every target.
TEST(NarrowRowsTest, StreamedOutputAtEveryOffsetMatchesPlainStores) {
  ForEachTarget([] {
    std::mt19937_64 rng(17);
    const int64_t rows = 9, cols = 128;
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      const Buffer x = Buffer::Of(t, RandomValues(rng, rows * cols, 0.25f, 1.5f));
      const Buffer w = Buffer::Of(DType::kF32, RandomValues(rng, cols, 1, 0.3f));
      const Buffer b = Buffer::Of(DType::kF32, RandomValues(rng, cols, 0, 0.3f));
      const size_t esize = ElementSize(t);
      for (size_t offset = 0; offset < 64 / esize; ++offset) {
        std::vector<unsigned char> plain((rows * cols + 64) * esize), streamed(plain.size());
        Buffer unused;
        RowNormArgs a = ArgsOf(NarrowConfigs()[2], rows, cols, x, w, b, unused);  // weight, bias
        CpuBackendOptions never, always;
        never.stream_bytes = int64_t{1} << 60;
        always.stream_bytes = 0;
        a.y = {t, plain.data() + offset * esize, rows * cols};
        ASSERT_TRUE(CpuBackend(never).RowNorm(a).ok());
        a.y = {t, streamed.data() + offset * esize, rows * cols};
        ASSERT_TRUE(CpuBackend(always).RowNorm(a).ok());
        ASSERT_EQ(plain, streamed) << DTypeName(t) << " offset " << offset;
      }
    }
  });
}

TEST(NarrowRowsTest, MatchesReferenceOnAdversarialRows) {
  ForEachTarget([] {
    std::mt19937_64 rng(13);
    const int64_t rows = 5, cols = 128;
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      struct Case {
        std::string name;
        std::vector<float> values;
      };
      std::vector<Case> cases = {
          {"mean 1e4 var 1", RandomValues(rng, rows * cols, 1e4f, 1.0f)},
          {"|x| >= 256 (f16 squares overflow)", RandomValues(rng, rows * cols, 0.0f, 3000.0f)},
          {"tiny", RandomValues(rng, rows * cols, 0.0f, 1e-3f)},
          {"constant", std::vector<float>(rows * cols, 3.25f)},
      };
      if (t != DType::kF16) {
        cases.push_back({"squares beyond fp32", RandomValues(rng, rows * cols, 0.0f, 1e25f)});
        cases.push_back({"squares below fp32", RandomValues(rng, rows * cols, 0.0f, 1e-22f)});
      }
      const Buffer w = Buffer::Of(t, RandomValues(rng, cols, 1, 0.5f));
      const Buffer b = Buffer::Of(t, RandomValues(rng, cols, 0, 0.5f));
      for (const Case& k : cases) {
        for (const NarrowConfig& c : NarrowConfigs()) {
          const Buffer x = Buffer::Of(t, k.values);
          Buffer y(t, rows * cols);
          const RowNormArgs a = ArgsOf(c, rows, cols, x, w, b, y);
          ASSERT_TRUE(CpuBackend().RowNorm(a).ok());
          const reference::RowNormResult ref = reference::RowNorm(a);
          ExpectAllMatch(y, ref.y, absl::StrCat(c.name, " ", DTypeName(t), " ", k.name),
                         ref.magnitude, ref.y_alt);
        }
      }
    }
  });
}

}  // namespace
}  // namespace normd::kernels
