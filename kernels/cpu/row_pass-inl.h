// SIMD passes over one row shared by the CPU kernels (Highway per-target code): the fused
// load-and-reduce pass (widening into an fp32 buffer, with the residual add) and the
// centred sum of squares. Built on convert-inl.h.
// Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_ROW_PASS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_ROW_PASS_INL_H_
#undef NORMD_KERNELS_CPU_ROW_PASS_INL_H_
#else
#define NORMD_KERNELS_CPU_ROW_PASS_INL_H_
#endif

#include "kernels/cpu/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

#endif  // NORMD_KERNELS_CPU_ROW_PASS_INL_H_
