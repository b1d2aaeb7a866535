// SIMD building blocks shared by the CPU kernels (Highway per-target code): exact
// conversions between f32/f16/bf16 vectors, float <-> double widening, the fused
// load-and-reduce pass over one row, and the centred sum of squares.
// Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless; safe from any thread.

// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_SIMD_INL_H_
#undef NORMD_KERNELS_CPU_SIMD_INL_H_
#else
#define NORMD_KERNELS_CPU_SIMD_INL_H_
#endif

#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "normd/kernels/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
using DU16 = hn::Rebind<uint16_t, D>;
using DF16 = hn::Rebind<hwy::float16_t, D>;
using DBF16 = hn::Rebind<hwy::bfloat16_t, D>;

// ---- float <-> double: a float vector is two double vectors (one on HWY_SCALAR) -------

#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, D>;
using VD = hn::Vec<DD>;
HWY_INLINE VD WideLo(V v) { return hn::PromoteTo(DD(), v); }
HWY_INLINE VD WideHi(V) { return hn::Zero(DD()); }
HWY_INLINE V Narrow(VD /*hi*/, VD lo) { return hn::DemoteTo(D(), lo); }
#else
using DD = hn::Repartition<double, D>;
using VD = hn::Vec<DD>;
using DH = hn::Half<D>;
HWY_INLINE VD WideLo(V v) { return hn::PromoteTo(DD(), hn::LowerHalf(DH(), v)); }
HWY_INLINE VD WideHi(V v) { return hn::PromoteTo(DD(), hn::UpperHalf(DH(), v)); }
HWY_INLINE V Narrow(VD hi, VD lo) {
  return hn::Combine(D(), hn::DemoteTo(DH(), hi), hn::DemoteTo(DH(), lo));
}
#endif

// ---- element conversion -------------------------------------------------------------

// bfloat16 round to nearest even on the bit pattern, NaN kept quiet; returns the 32-bit
// patterns whose upper halves are the bf16 values.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> RoundBF16Bits(D d, V v) {
  const hn::RebindToUnsigned<D> du;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb));
  const auto quiet = hn::Or(bits, hn::Set(du, 0x00400000u));
  (void)d;
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded);
}

// Highway 1.0.3's f16 conversions without F16C (SSE4 and below, and the scalar target)
// truncate instead of rounding, never produce Inf, and misread f16 Inf/NaN; those targets
// use the integer versions below, which match dtype.h exactly.
#undef NORMD_SOFT_F16
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || (HWY_ARCH_X86 && HWY_TARGET >= HWY_SSE4)
#define NORMD_SOFT_F16 1
#else
#define NORMD_SOFT_F16 0
#endif

using DU32 = hn::RebindToUnsigned<D>;
using DI32 = hn::RebindToSigned<D>;

// f32 -> f16 bit patterns (in 32-bit lanes), round to nearest even, overflow to Inf.
HWY_INLINE hn::Vec<DU32> F16BitsFromF32(D d, V v) {
  const DU32 du;
  const DI32 di;
  const auto u = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 0x8000u));
  const auto abs = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto abs_i = hn::BitCast(di, abs);  // non-negative: signed compares are exact
  const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
  const auto normal = hn::ShiftRight<13>(hn::Add(abs, hn::Add(hn::Set(du, 0xc8000fffu), odd)));
  // Subnormal results: adding 0.5 lets the FPU round at the f16 subnormal step (2^-24).
  const auto sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, abs), hn::Set(d, 0.5f))),
                           hn::Set(du, 0x3f000000u));
  const auto nan =
      hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 0x3ffu)));
  auto r = hn::IfThenElse(hn::RebindMask(du, hn::Lt(abs_i, hn::Set(di, 0x38800000))), sub, normal);
  r = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x477fefff))),
                     hn::Set(du, 0x7c00u), r);
  r = hn::IfThenElse(hn::RebindMask(du, hn::Gt(abs_i, hn::Set(di, 0x7f800000))), nan, r);
  return hn::Or(r, sign);
}

// f16 bit patterns (in 32-bit lanes) -> f32, exact, Inf and NaN kept.
HWY_INLINE V F32FromF16Bits(D d, hn::Vec<DU32> h) {
  const DU32 du;
  const DI32 di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1fu));
  const auto mant = hn::And(h, hn::Set(du, 0x3ffu));
  const auto normal =
      hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(mant));
  const auto special = hn::Or(hn::Set(du, 0x7f800000u), hn::ShiftLeft<13>(mant));
  const auto sub =
      hn::BitCast(du, hn::Mul(hn::ConvertTo(d, hn::BitCast(di, mant)), hn::Set(d, 0x1p-24f)));
  auto r = hn::IfThenElse(hn::Eq(exp, hn::Set(du, 31u)), special, normal);
  r = hn::IfThenElse(hn::Eq(exp, hn::Zero(du)), sub, r);
  return hn::BitCast(d, hn::Or(r, sign));
}

// N elements of type t at p, widened to float.
template <DType kT>
HWY_INLINE V LoadAs(D d, const void* p) {
  constexpr DType t = kT;
  switch (t) {
    case DType::kF32:
      return hn::LoadU(d, static_cast<const float*>(p));
    case DType::kF16:
#if NORMD_SOFT_F16
      return F32FromF16Bits(
          d, hn::PromoteTo(DU32(), hn::LoadU(DU16(), static_cast<const uint16_t*>(p))));
#else
      return hn::PromoteTo(d, hn::LoadU(DF16(), static_cast<const hwy::float16_t*>(p)));
#endif
    case DType::kBF16:
      return hn::PromoteTo(d, hn::LoadU(DBF16(), static_cast<const hwy::bfloat16_t*>(p)));
  }
  return hn::Zero(d);
}

// v rounded (nearest even) to t, as the bits to store: f32 bits, or u16 lanes.
template <DType kT>
HWY_INLINE hn::Vec<DU16> ToHalfBits(D d, V v) {
  const DI32 di;
  if constexpr (kT == DType::kF16) {
#if NORMD_SOFT_F16
    return hn::DemoteTo(DU16(), hn::BitCast(di, F16BitsFromF32(d, v)));
#else
    return hn::BitCast(DU16(), hn::DemoteTo(DF16(), v));
#endif
  }
  return hn::DemoteTo(DU16(), hn::BitCast(di, hn::ShiftRight<16>(RoundBF16Bits(d, v))));
}

template <DType kT>
HWY_INLINE void StoreAs(D d, V v, void* p) {
  if constexpr (kT == DType::kF32) {
    hn::StoreU(v, d, static_cast<float*>(p));
  } else {
    hn::StoreU(ToHalfBits<kT>(d, v), DU16(), static_cast<uint16_t*>(p));
  }
}

// REQUIRES: p aligned to the stored vector's size.
template <DType kT>
HWY_INLINE void StreamAs(D d, V v, void* p) {
  if constexpr (kT == DType::kF32) {
    hn::Stream(v, d, static_cast<float*>(p));
  } else {
    hn::Stream(ToHalfBits<kT>(d, v), DU16(), static_cast<uint16_t*>(p));
  }
}

// v rounded to t and widened back (cast_before_weight's intermediate rounding).
HWY_INLINE V RoundTo(D d, DType t, V v) {
  switch (t) {
    case DType::kF32:
      return v;
    case DType::kF16:
#if NORMD_SOFT_F16
      return F32FromF16Bits(d, F16BitsFromF32(d, v));
#else
      return hn::PromoteTo(d, hn::DemoteTo(DF16(), v));
#endif
    case DType::kBF16: {
      const hn::RebindToUnsigned<D> du;
      return hn::BitCast(d, hn::And(RoundBF16Bits(d, v), hn::Set(du, 0xffff0000u)));
    }
  }
  return v;
}

HWY_INLINE const void* Offset(const void* p, DType t, int64_t i) {
  return static_cast<const char*>(p) + i * ElementSize(t);
}
HWY_INLINE void* Offset(void* p, DType t, int64_t i) {
  return static_cast<char*>(p) + i * ElementSize(t);
}

// ---- passes over one row --------------------------------------------------------------

enum class Stat { kNone, kSum, kSumOfSquares };

// Widens n elements of x (plus alpha * skip when skip is given) into buf, writing whole
// vectors (the padded tail lanes are zero), and h when given. Returns, in double, the sum
// of the row (kSum) or the sum of squares of its first m elements (kSumOfSquares).
template <DType kT, Stat kStat, bool kSkip, bool kH>
double LoadRow(const void* x, const void* skip, float alpha, int64_t n, float* buf, int64_t m,
               void* h, const void* prefetch) {
  constexpr DType t = kT, ht = kT;
  constexpr Stat stat = kStat;
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VD s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  const V va = hn::Set(d, alpha);
  auto step = [&](V v, int64_t i) HWY_ATTR {
    hn::Store(v, d, buf + i);
    if constexpr (stat == Stat::kSum) {
      s0 = hn::Add(s0, WideLo(v));
      s1 = hn::Add(s1, WideHi(v));
    } else if (stat == Stat::kSumOfSquares) {
      if (i >= m) return;
      if (i + N > m) v = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(m - i)), v);
      const VD lo = WideLo(v), hi = WideHi(v);
      s0 = hn::MulAdd(lo, lo, s0);
      s1 = hn::MulAdd(hi, hi, s1);
    }
  };
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    if (prefetch != nullptr) hwy::Prefetch(static_cast<const char*>(Offset(prefetch, t, i)));
    V v = LoadAs<t>(d, Offset(x, t, i));
    if constexpr (kSkip) v = hn::MulAdd(va, LoadAs<t>(d, Offset(skip, t, i)), v);
    if constexpr (kH) StoreAs<ht>(d, v, Offset(h, ht, i));
    step(v, i);
  }
  if (i < n) {
    // The tail goes through zeroed stack copies: a partial vector load could fault.
    alignas(64) unsigned char tx[64 * 4] = {}, ts[64 * 4] = {};
    const size_t bytes = static_cast<size_t>(n - i) * ElementSize(t);
    std::memcpy(tx, Offset(x, t, i), bytes);
    V v = LoadAs<t>(d, tx);
    if constexpr (kSkip) {
      std::memcpy(ts, Offset(skip, t, i), bytes);
      v = hn::MulAdd(va, LoadAs<t>(d, ts), v);
    }
    if constexpr (kH) {
      StoreAs<ht>(d, v, tx);
      std::memcpy(Offset(h, ht, i), tx, static_cast<size_t>(n - i) * ElementSize(ht));
    }
    step(v, i);
  }
  (void)skip;
  (void)h;
  (void)m;
  return stat == Stat::kNone ? 0.0 : hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
}

using LoadRowFn = double (*)(const void* x, const void* skip, float alpha, int64_t n, float* buf,
                             int64_t m, void* h, const void* prefetch);

template <DType kT, Stat kStat>
LoadRowFn PickLoadRow(bool skip, bool h) {
  if (!skip) return &LoadRow<kT, kStat, false, false>;
  return h ? &LoadRow<kT, kStat, true, true> : &LoadRow<kT, kStat, true, false>;
}

template <DType kT>
LoadRowFn PickLoadRow(Stat stat, bool skip, bool h) {
  switch (stat) {
    case Stat::kNone:
      return PickLoadRow<kT, Stat::kNone>(skip, h);
    case Stat::kSum:
      return PickLoadRow<kT, Stat::kSum>(skip, h);
    case Stat::kSumOfSquares:
      return PickLoadRow<kT, Stat::kSumOfSquares>(skip, h);
  }
  return nullptr;
}

inline LoadRowFn PickLoadRow(DType t, Stat stat, bool skip, bool h) {
  switch (t) {
    case DType::kF32:
      return PickLoadRow<DType::kF32>(stat, skip, h);
    case DType::kF16:
      return PickLoadRow<DType::kF16>(stat, skip, h);
    case DType::kBF16:
      return PickLoadRow<DType::kBF16>(stat, skip, h);
  }
  return nullptr;
}

// Sum of ((v - hi) - lo)^2 over buf[0, n): deviations in fp32 (exact near the mean),
// squares accumulated in double. fp32 accumulation would make the error depend on the
// vector width (one lane on HWY_SCALAR: ~1e-6 relative at 8K elements), and an output that
// a bias nearly cancels carries the variance's relative error.
inline double CenteredSumOfSquares(const float* buf, int64_t n, float hi, float lo) {
  const D d;
  const DD dd;
  const size_t N = hn::Lanes(d);
  const V vhi = hn::Set(d, hi), vlo = hn::Set(d, lo);
  VD a0 = hn::Zero(dd), a1 = hn::Zero(dd);
  for (int64_t i = 0; i < n; i += N) {
    V c = hn::Sub(hn::Sub(hn::Load(d, buf + i), vhi), vlo);
    if (i + static_cast<int64_t>(N) > n) c = hn::IfThenElseZero(hn::FirstN(d, n - i), c);
    const VD l = WideLo(c), h = WideHi(c);
    a0 = hn::MulAdd(l, l, a0);
    a1 = hn::MulAdd(h, h, a1);
  }
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(a0, a1)));
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_SIMD_INL_H_
