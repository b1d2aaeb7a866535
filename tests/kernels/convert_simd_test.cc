// The SIMD element conversions (kernels/cpu/convert-inl.h) on every compiled target,
// bit for bit against the scalar conversions of dtype.h (which dtype_test.cc checks
// against the compiler's _Float16 and a nearest search): f16 and bf16 widening over all
// 65536 patterns; narrowing on every representable value, on each tie between neighbours
// and just either side of it, on subnormals, overflow, infinities, NaN, and a large
// random sample of f32 patterns, a vector at a time and two at a time (StoreAs2 and
// StreamAs2, as the epilogues store). A truncating or round-half-up store fails the ties.
// bf16 narrowing is given NaNs as the kernels give it them (bf16_nan.h) and must store the
// bits the scalar conversion gives the NaN before that.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/kernels/convert_simd_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
// clang-format on

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16_nan.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {

// n (a multiple of the vector length) elements of type t at `in`, widened to floats.
template <DType kT>
void WidenT(const void* in, size_t n, float* out) {
  const D d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    hn::StoreU(LoadAs<kT>(d, Offset(in, kT, i)), d, out + i);
}
// n floats narrowed to type t at `out`.
template <DType kT>
void NarrowT(const float* in, size_t n, void* out) {
  const D d;
  for (size_t i = 0; i < n; i += hn::Lanes(d))
    StoreAs<kT>(d, hn::LoadU(d, in + i), Offset(out, kT, i));
}

// The same two vectors a step through StoreAs2, or StreamAs2 (`out` 64-byte aligned), as the
// kernels' epilogues store bf16 (n a multiple of two vectors).
template <DType kT>
void NarrowPairsT(const float* in, size_t n, void* out, bool stream) {
  const D d;
  const size_t N = hn::Lanes(d);
  for (size_t i = 0; i < n; i += 2 * N) {
    const V a = hn::LoadU(d, in + i), b = hn::LoadU(d, in + i + N);
    if (stream) {
      StreamAs2<kT>(d, a, b, Offset(out, kT, static_cast<int64_t>(i)));
    } else {
      StoreAs2<kT>(d, a, b, Offset(out, kT, static_cast<int64_t>(i)));
    }
  }
  hwy::FlushStream();
}

void WidenImpl(DType t, const void* in, size_t n, float* out) {
  t == DType::kF16 ? WidenT<DType::kF16>(in, n, out) : WidenT<DType::kBF16>(in, n, out);
}
void NarrowImpl(DType t, const float* in, size_t n, void* out) {
  t == DType::kF16 ? NarrowT<DType::kF16>(in, n, out) : NarrowT<DType::kBF16>(in, n, out);
}
void NarrowPairsImpl(DType t, const float* in, size_t n, void* out, bool stream) {
  t == DType::kF16 ? NarrowPairsT<DType::kF16>(in, n, out, stream)
                   : NarrowPairsT<DType::kBF16>(in, n, out, stream);
}
size_t LanesImpl() { return hn::Lanes(D()); }
// Whether this target's bf16 narrowing is the hardware's (AVX512_BF16), which reads
// subnormal inputs as zero: the kernels never hand it one, since they run with denormals
// flushed, so this test expects a signed zero for them there.
bool NativeBF16Impl() { return NORMD_NATIVE_BF16 != 0; }

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "gtest/gtest.h"
#include "tests/kernels/test_util.h"

namespace normd::kernels::cpu {
HWY_EXPORT(WidenImpl);
HWY_EXPORT(NarrowImpl);
HWY_EXPORT(NarrowPairsImpl);
HWY_EXPORT(LanesImpl);
HWY_EXPORT(NativeBF16Impl);
namespace {

using normd::testing::ForEachTarget;

// Pads `v` to a multiple of `vectors` of the current target's vectors.
template <class T>
void Pad(std::vector<T>* v, size_t vectors = 1) {
  const size_t lanes = HWY_DYNAMIC_DISPATCH(LanesImpl)() * vectors;
  v->resize((v->size() + lanes - 1) / lanes * lanes);
}

void ExpectWidensLikeScalar(DType t) {
  std::vector<uint16_t> bits(65536);
  for (uint32_t b = 0; b < 65536; ++b) bits[b] = static_cast<uint16_t>(b);
  Pad(&bits);
  std::vector<float> got(bits.size());
  HWY_DYNAMIC_DISPATCH(WidenImpl)(t, bits.data(), bits.size(), got.data());
  for (uint32_t b = 0; b < 65536; ++b) {
    const float want = LoadElement(t, bits.data(), b);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[b])) << DTypeName(t) << " pattern " << b;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[b]), std::bit_cast<uint32_t>(want))
          << DTypeName(t) << " pattern " << b;
    }
  }
}

TEST(ConvertSimdTest, F16WideningIsExactOnEveryPattern) {
  ForEachTarget([] { ExpectWidensLikeScalar(DType::kF16); });
}

TEST(ConvertSimdTest, BF16WideningIsExactOnEveryPattern) {
  ForEachTarget([] { ExpectWidensLikeScalar(DType::kBF16); });
}

// The floats a narrowing must get right: every representable value of t, each tie
// between neighbours and the floats just either side of it, both signs; subnormals,
// overflow, infinities, NaNs; and a random sample of f32 patterns.
std::vector<float> NarrowingCases(DType t) {
  std::vector<float> v;
  const uint32_t top = t == DType::kF16 ? 0x7c00 : 0x7f80;  // +Inf's pattern
  for (uint32_t b = 0; b < top; ++b) {
    uint16_t lo_bits = static_cast<uint16_t>(b), hi_bits = static_cast<uint16_t>(b + 1);
    const float lo = LoadElement(t, &lo_bits, 0), hi = LoadElement(t, &hi_bits, 0);
    const float mid = lo + (hi - lo) / 2;  // exact: one more bit than t has
    for (float sign : {1.0f, -1.0f}) {
      for (float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        v.push_back(sign * f);
      }
    }
  }
  for (float f :
       {65504.0f, 65519.996f, 65520.0f, 65536.0f, 1e10f, 3.4e38f, INFINITY, 0x1p-24f, 0x1p-25f,
        0x1.8p-25f, 0x1p-26f, 0x1p-126f, 0x1p-149f, 0.0f, std::numeric_limits<float>::quiet_NaN(),
        std::bit_cast<float>(0x7f800001u),  // signalling NaN
        std::bit_cast<float>(0x7fbfffffu)}) {
    v.push_back(f);
    v.push_back(-f);
  }
  std::mt19937 rng(2026);
  for (int i = 0; i < 1 << 20; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

// How the narrowing stores: a vector at a time (StoreAs), two (StoreAs2), or two streamed
// (StreamAs2).
enum class Stores { kOne, kPairs, kStreamedPairs };

void ExpectNarrowsLikeScalar(DType t, Stores stores = Stores::kOne) {
  const std::vector<float> cases = NarrowingCases(t);
  std::vector<float> in = cases;
  if (t == DType::kBF16) {
    for (float& f : in) f = BF16SafeNaN(f);
  }
  const size_t n = in.size();
  Pad(&in, 2);
  // 64-byte aligned for the streamed pairs: 32 u16 of slack.
  std::vector<uint16_t> space(in.size() + 32);
  uint16_t* got = space.data();
  while (reinterpret_cast<uintptr_t>(got) % 64 != 0) ++got;
  if (stores == Stores::kOne) {
    HWY_DYNAMIC_DISPATCH(NarrowImpl)(t, in.data(), in.size(), got);
  } else {
    HWY_DYNAMIC_DISPATCH(NarrowPairsImpl)
    (t, in.data(), in.size(), got, stores == Stores::kStreamedPairs);
  }
  const bool native_bf16 = HWY_DYNAMIC_DISPATCH(NativeBF16Impl)();
  int failures = 0;
  for (size_t i = 0; i < n && failures < 5; ++i) {
    uint16_t want;
    StoreElement(t, &want, 0, cases[i]);
    if (t == DType::kBF16 && native_bf16 && std::fpclassify(in[i]) == FP_SUBNORMAL) {
      want = std::signbit(in[i]) ? 0x8000 : 0;
    }
    // f16 NaNs: a quiet NaN of the same sign; bf16 ones: the scalar conversion's bits.
    const bool nan_want = std::isnan(in[i]) && t == DType::kF16;
    const bool ok = nan_want ? (got[i] & 0x7fff) > 0x7c00 && (got[i] & 0x8000) == (want & 0x8000)
                             : got[i] == want;
    if (!ok) {
      ADD_FAILURE() << DTypeName(t) << ": " << cases[i] << " (bits 0x" << std::hex
                    << std::bit_cast<uint32_t>(cases[i]) << ") narrowed to 0x" << got[i]
                    << ", expected 0x" << want << std::dec;
      ++failures;
    }
  }
}

TEST(ConvertSimdTest, F16NarrowingRoundsToNearestEven) {
  ForEachTarget([] { ExpectNarrowsLikeScalar(DType::kF16); });
}

TEST(ConvertSimdTest, BF16NarrowingRoundsToNearestEven) {
  ForEachTarget([] { ExpectNarrowsLikeScalar(DType::kBF16); });
}

// The epilogues store bf16 two vectors at a time (vcvtne2ps2bf16 where the target has
// AVX512_BF16): the same bits as one at a time, each vector in its place, stored or streamed.
TEST(ConvertSimdTest, PairedStoresNarrowAsSingleOnes) {
  ForEachTarget([] {
    for (DType t : {DType::kBF16, DType::kF16}) {
      ExpectNarrowsLikeScalar(t, Stores::kPairs);
      ExpectNarrowsLikeScalar(t, Stores::kStreamedPairs);
    }
  });
}

}  // namespace
}  // namespace normd::kernels::cpu
#endif  // HWY_ONCE
