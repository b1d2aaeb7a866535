// NaNs in fp32 parameters for bf16 outputs (kernels/cpu/bf16_nan.h). The kernels round to
// bf16 without a select for NaN, exact only for NaNs with zero low 16 bits; fp32 weights,
// biases, running statistics and alpha can hold others. Each such NaN must still come out
// as the NaN the scalar conversion gives it (dtype.h, BF16FromF32), on every compiled
// target and every store path (y under a NaN alpha: a quiet NaN); payloads chosen so that rounding
// them as finite values carries into the sign (0x7fff8000 becomes -0) or into the payload.
#include "kernels/cpu/bf16_nan.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/row_norm_simd.h"
#include "normd/kernels/cpu_backend.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels {
namespace {

using normd::testing::Buffer;
using normd::testing::ForEachTarget;
using normd::testing::RandomValues;

const uint32_t kNaNs[] = {0x7fffffffu, 0xffff8000u, 0x7fff9abcu, 0xffc18000u, 0x7f800001u};

float NaNOf(uint32_t bits) { return std::bit_cast<float>(bits); }

// The bits of bf16 element i of y.
uint16_t BitsAt(const Buffer& y, int64_t i) {
  uint16_t bits;
  std::memcpy(&bits, y.bytes.data() + 2 * i, 2);
  return bits;
}

// The bf16 value at i is a NaN with `want`'s bits, sign aside (which of a NaN's negations
// reaches the output depends on the operation's form).
void ExpectNaN(const Buffer& y, int64_t i, uint16_t want, const std::string& what) {
  const uint16_t got = BitsAt(y, i);
  EXPECT_EQ(got & 0x7fff, want & 0x7fff)
      << what << " element " << i << ": 0x" << std::hex << got << ", want 0x" << want;
}

// The bf16 value at i is a quiet NaN: y under a NaN alpha, whose statistics may turn the
// NaN into the default one (an ASan build's code does; a release build's keeps alpha's).
void ExpectQuietNaN(const Buffer& y, int64_t i, const std::string& what) {
  const uint16_t got = BitsAt(y, i);
  EXPECT_EQ(got & 0x7fc0, 0x7fc0) << what << " element " << i << ": 0x" << std::hex << got;
}

TEST(BF16SafeNaNTest, KeepsTheBF16BitsAndClearsTheLowHalf) {
  std::mt19937 rng(47);
  volatile float one = 1.0f;  // a real multiply: it quiets a signalling NaN
  for (int i = 0; i < 1 << 16; ++i) {
    const uint32_t bits = (rng() & 0x807fffffu) | 0x7f800000u;
    const float f = NaNOf(bits);
    const float safe = cpu::BF16SafeNaN(f);
    if (!std::isnan(f)) {  // Inf
      EXPECT_EQ(std::bit_cast<uint32_t>(safe), bits);
      continue;
    }
    ASSERT_TRUE(std::isnan(safe));
    ASSERT_EQ(std::bit_cast<uint32_t>(safe) & 0xffffu, 0u) << std::hex << bits;
    ASSERT_EQ(BF16FromF32(safe * one), BF16FromF32(f * one)) << std::hex << bits;
  }
  for (float f : {0.0f, -0.0f, 1.5f, -3e38f, INFINITY, -INFINITY, 0x1p-140f}) {
    EXPECT_EQ(std::bit_cast<uint32_t>(cpu::BF16SafeNaN(f)), std::bit_cast<uint32_t>(f));
  }
}

// The scan that decides whether a parameter needs BF16SafeNaN: a NaN of any pattern at any
// position of every length up to past a step of eight AVX-512 vectors is found; Inf, the
// largest finite value and -0 are not NaNs.
TEST(BF16NaNParamsTest, AnyNaNFindsEveryNaNAndNothingElse) {
  ForEachTarget([&] {
    for (int64_t n = 0; n <= 300; ++n) {
      std::vector<float> p(static_cast<size_t>(n) + 1, NaNOf(0x7fc00000u));  // one past n
      for (int64_t i = 0; i < n; ++i) {
        p[i] = std::array{INFINITY, -INFINITY, 3.4028235e38f, -0.0f}[i % 4];
      }
      ASSERT_FALSE(cpu::AnyNaN(p.data(), n)) << n;
      for (int64_t i = 0; i < n; ++i) {
        const float keep = p[i];
        p[i] = NaNOf(kNaNs[i % std::size(kNaNs)]);
        ASSERT_TRUE(cpu::AnyNaN(p.data(), n)) << "n " << n << ", NaN at " << i;
        p[i] = keep;
      }
    }
  });
}

// Row ops: parameters with one NaN each, in one vector or another of a pair, or the last
// element (past whole vectors at 100 columns), in rows short (pairs in cache), long and
// streamed; a NaN alpha makes h its own NaN and y a NaN.
TEST(BF16NaNParamsTest, RowOpsStoreTheParametersNaNs) {
  std::mt19937_64 rng(470);
  ForEachTarget([&] {
    for (int64_t cols : {int64_t{64}, int64_t{100}, int64_t{1024}, int64_t{8192}}) {
      for (bool stream : {false, true}) {
        for (RowNormKind kind : {RowNormKind::kLayer, RowNormKind::kRms}) {
          const int64_t rows = 6, n = rows * cols;
          Buffer x = Buffer::Of(DType::kBF16, RandomValues(rng, n));
          Buffer y(DType::kBF16, n);
          CpuBackend cpu(CpuBackendOptions{.threads = 1, .stream_bytes = stream ? 0 : 1 << 30});
          const std::string what = absl::StrCat(kind == RowNormKind::kLayer ? "layer" : "rms",
                                                " cols ", cols, stream ? " streamed" : "");
          RowNormArgs a;
          a.kind = kind;
          a.rows = rows;
          a.cols = cols;
          a.x = x.view();
          a.eps = 1e-5;
          a.y = y.view_mut();
          // NaN k in the weight at wcol[k], in the bias at wcol[k] - 1.
          const int64_t wcol[] = {1, 9, 18, 27, cols - 1};
          for (size_t k = 0; k < std::size(kNaNs); ++k) {
            std::vector<float> w = RandomValues(rng, cols, 1, 0.5), b = RandomValues(rng, cols);
            w[wcol[k]] = NaNOf(kNaNs[k]);
            b[wcol[k] - 1] = NaNOf(kNaNs[k]);
            Buffer wb = Buffer::Of(DType::kF32, w), bb = Buffer::Of(DType::kF32, b);
            a.weight = wb.view();
            if (kind == RowNormKind::kLayer) a.bias = bb.view();
            ASSERT_TRUE(cpu.RowNorm(a).ok());
            const uint16_t want = BF16FromF32(NaNOf(kNaNs[k]));
            for (int64_t r = 0; r < rows; ++r) {
              ExpectNaN(y, r * cols + wcol[k], want, what + " weight");
              if (kind == RowNormKind::kLayer) {
                ExpectNaN(y, r * cols + wcol[k] - 1, want, what + " bias");
              }
            }
          }
          // alpha NaN in a residual add: h is alpha's NaN throughout, y a NaN.
          Buffer skip = Buffer::Of(DType::kBF16, RandomValues(rng, n));
          Buffer h(DType::kBF16, n);
          for (uint32_t bits : kNaNs) {
            RowNormArgs r = a;
            r.weight = {};
            r.bias = {};
            r.residual = ResidualPlacement::kAddThenNorm;
            r.skip = skip.view();
            r.alpha = NaNOf(bits);
            r.h = h.view_mut();
            ASSERT_TRUE(cpu.RowNorm(r).ok());
            for (int64_t i = 0; i < n; i += 97) {
              ExpectNaN(h, i, BF16FromF32(NaNOf(bits)), what + " h, alpha NaN");
              ExpectQuietNaN(y, i, what + " y, alpha NaN");
            }
          }
        }
      }
    }
  });
}

// Channel ops: a NaN weight, bias, running mean or running variance for one channel each
// makes that channel's outputs the parameter's NaN (inference BatchNorm, GroupNorm).
TEST(BF16NaNParamsTest, ChannelOpsStoreTheParametersNaNs) {
  std::mt19937_64 rng(4700);
  ForEachTarget([&] {
    for (Layout layout : {Layout::kChannelsFirst, Layout::kChannelsLast}) {
      for (bool stream : {false, true}) {
        const int64_t nn = 2, c = 32, s = 40, n = nn * c * s;
        Buffer x = Buffer::Of(DType::kBF16, RandomValues(rng, n));
        std::vector<float> w = RandomValues(rng, c, 1, 0.5), b = RandomValues(rng, c);
        std::vector<float> rm = RandomValues(rng, c), rv(c, 1.5f);
        // Channel of each parameter's NaN k: weight 4k, bias 4k + 1, mean 4k + 2, var 4k + 3.
        for (size_t k = 0; k < std::size(kNaNs); ++k) {
          w[4 * k] = b[4 * k + 1] = rm[4 * k + 2] = rv[4 * k + 3] = NaNOf(kNaNs[k]);
        }
        Buffer wb = Buffer::Of(DType::kF32, w), bb = Buffer::Of(DType::kF32, b);
        Buffer rmb = Buffer::Of(DType::kF32, rm), rvb = Buffer::Of(DType::kF32, rv);
        CpuBackend cpu(CpuBackendOptions{.threads = 1, .stream_bytes = stream ? 0 : 1 << 30});
        const auto channel_of = [&](int64_t i) {
          return layout == Layout::kChannelsFirst ? i / s % c : i % c;
        };
        const std::string what =
            absl::StrCat(layout == Layout::kChannelsFirst ? "channels-first" : "channels-last",
                         stream ? " streamed" : "");
        Buffer y(DType::kBF16, n);
        BatchNormArgs a;
        a.n = nn, a.c = c, a.s = s, a.layout = layout;
        a.x = x.view(), a.weight = wb.view(), a.bias = bb.view();
        a.running_mean = rmb.view(), a.running_var = rvb.view();
        a.training = false;
        a.y = y.view_mut();
        ASSERT_TRUE(cpu.BatchNorm(a).ok());
        for (int64_t i = 0; i < n; ++i) {
          const int64_t ch = channel_of(i);
          if (ch < 4 * static_cast<int64_t>(std::size(kNaNs))) {
            ExpectNaN(y, i, BF16FromF32(NaNOf(kNaNs[ch / 4])), what + " batch norm");
          }
        }
        Buffer g(DType::kBF16, n);
        GroupNormArgs ga;
        ga.n = nn, ga.c = c, ga.s = s, ga.groups = 4, ga.layout = layout;
        ga.x = x.view(), ga.weight = wb.view(), ga.bias = bb.view();
        ga.y = g.view_mut();
        ASSERT_TRUE(cpu.GroupNorm(ga).ok());
        for (int64_t i = 0; i < n; ++i) {
          const int64_t ch = channel_of(i);
          if (ch < 4 * static_cast<int64_t>(std::size(kNaNs)) && ch % 4 < 2) {
            ExpectNaN(g, i, BF16FromF32(NaNOf(kNaNs[ch / 4])), what + " group norm");
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace normd::kernels
