// row_norm_simd.h's AnyNaN: the scan of a call's fp32 parameters for a NaN, which a bf16
// output stores with its low bits cleared (bf16_nan.h, row_norm.cc), and BF16StoresKeepNaNs:
// whether the target needs that scan. Highway per-target code, dispatched at run time.
// Stateless; safe from any thread.
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/nan_scan.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/convert-inl.h"
// clang-format on

#include <cmath>
#include <cstdint>

#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/simd_targets.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether p[0, n) holds a NaN: one runs on every call with fp32 parameters and a bf16
// output, a 1x4096 one included. Integer operations, two a vector (an and and a max): a
// NaN's bits with the sign cleared exceed Inf's as integers. Eight vectors a step into four
// maxima: at two a step the loop's own instructions held it (4096 floats in L1, Zen 3, four
// alternating runs: 180-290 ns a call, eight a step 93-178; BENCHMARKS.md, issue 16,
// forty-eighth session).
bool AnyNaNImpl(const float* p, int64_t n) {
  const D d;
  const DI32 di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto magnitude = hn::Set(di, 0x7fffffff);
  const auto bits = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    return hn::And(hn::BitCast(di, hn::LoadU(d, p + i)), magnitude);
  };
  auto m0 = hn::Zero(di), m1 = hn::Zero(di), m2 = hn::Zero(di), m3 = hn::Zero(di);
  int64_t i = 0;
  for (; i + 8 * N <= n; i += 8 * N) {
    m0 = hn::Max(m0, hn::Max(bits(i), bits(i + 4 * N)));
    m1 = hn::Max(m1, hn::Max(bits(i + N), bits(i + 5 * N)));
    m2 = hn::Max(m2, hn::Max(bits(i + 2 * N), bits(i + 6 * N)));
    m3 = hn::Max(m3, hn::Max(bits(i + 3 * N), bits(i + 7 * N)));
  }
  for (; i + N <= n; i += N) m0 = hn::Max(m0, bits(i));
  const auto m = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  bool any = !hn::AllFalse(di, hn::Gt(m, hn::Set(di, 0x7f800000)));
  for (; i < n; ++i) any |= std::isnan(p[i]);
  return any;
}

// vcvtneps2bf16 stores a NaN as its upper half with the quiet bit set, the bits the scan's
// BF16SafeNaN copy and then RoundBF16Bits give it (bf16_nan_test checks every target).
bool BF16StoresKeepNaNsImpl() { return NORMD_NATIVE_BF16 != 0; }

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normd::kernels::cpu {

HWY_EXPORT(AnyNaNImpl);
HWY_EXPORT(BF16StoresKeepNaNsImpl);

bool AnyNaN(const float* p, int64_t n) { return NORMD_DISPATCH(AnyNaNImpl)(p, n); }

bool BF16StoresKeepNaNs() { return NORMD_DISPATCH(BF16StoresKeepNaNsImpl)(); }

}  // namespace normd::kernels::cpu
#endif  // HWY_ONCE
