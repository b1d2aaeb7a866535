// The half conversions against the compiler's _Float16 (IEEE binary16, round to nearest
// even) and against a double-based nearest search for bfloat16.
#include "normd/kernels/dtype.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

// The compiler's _Float16 is the reference of the next two tests; clang 14 has none on x86
// (the sanitizer build's compiler), gcc 12 has: they are built where it exists.
#if defined(__FLT16_MAX__)
TEST(DTypeTest, EveryF16DecodesLikeFloat16) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float want = static_cast<float>(std::bit_cast<_Float16>(h));
    const float got = F32FromF16(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << b;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << b;
    }
  }
}

void ExpectF16Encodes(float f) {
  const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
  const uint16_t got = F16FromF32(f);
  if (std::isnan(f)) {
    EXPECT_EQ(got & 0x7e00, 0x7e00) << "NaN must stay a quiet NaN";
    EXPECT_EQ(got & 0x8000, want & 0x8000);
  } else {
    ASSERT_EQ(got, want) << f << " bits " << std::bit_cast<uint32_t>(f);
  }
}

TEST(DTypeTest, F16EncodingRoundsToNearestEven) {
  // Every f16 value, and each midpoint between neighbours (ties) and just around them.
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    for (float sign : {1.0f, -1.0f}) {
      const float lo = F32FromF16(static_cast<uint16_t>(b));
      const float hi = F32FromF16(static_cast<uint16_t>(b + 1));
      const float mid = sign * (lo + (hi - lo) / 2);
      ExpectF16Encodes(sign * lo);
      ExpectF16Encodes(mid);
      ExpectF16Encodes(std::nextafter(mid, 0.0f));
      ExpectF16Encodes(std::nextafter(mid, sign * INFINITY));
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i)
    ExpectF16Encodes(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f, 65519.99f, 65520.0f, 1e30f, -1e30f,
                  1e-30f, 5.96e-8f, 2.98e-8f, 2.99e-8f, std::nanf("")}) {
    ExpectF16Encodes(f);
  }
}

#endif  // __FLT16_MAX__

TEST(DTypeTest, BF16EncodingRoundsToNearestEvenAndKeepsNaN) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    const uint16_t got = BF16FromF32(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(F32FromBF16(got)));
      continue;
    }
    // Neighbours of the truncation bracket f; the nearer wins, ties to the even one.
    const uint16_t down = static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
    const double lo = F32FromBF16(down);
    double hi = F32FromBF16(static_cast<uint16_t>(down + 1));
    if (std::isinf(hi)) hi = std::copysign(0x1p128, hi);  // where Inf would sit on the grid
    const double dlo = std::fabs(f - lo), dhi = std::fabs(hi - f);
    const uint16_t want =
        (dlo < dhi || (dlo == dhi && (down & 1) == 0)) ? down : static_cast<uint16_t>(down + 1);
    ASSERT_EQ(got, want) << f;
  }
  EXPECT_EQ(BF16FromF32(INFINITY), 0x7f80);
  EXPECT_EQ(BF16FromF32(-INFINITY), 0xff80);
  EXPECT_EQ(BF16FromF32(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to Inf
  EXPECT_EQ(F32FromBF16(BF16FromF32(1.0f + 0x1p-8f)), 1.0f);          // tie to even
  EXPECT_EQ(F32FromBF16(BF16FromF32(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
}

TEST(DTypeTest, RoundDoubleFindsNearestWithoutDoubleRounding) {
  // 1 + 2^-11 + 2^-40 is just above the f16 midpoint: nearest is 1 + 2^-10. Through float
  // it would become exactly the midpoint and round down to 1.
  const double d = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(normd::testing::RoundDouble(DType::kF16, d), 1.0f + 0x1p-10f);
}

}  // namespace
}  // namespace normd::kernels
