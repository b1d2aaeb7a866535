// A row's moments from LoadRow's sums and its fp32 copy (Highway per-target code): the
// centred pass that turns a first mean into the row's moments, its double-precision
// fallbacks, and the judgement of one-pass sums (OnePassMoments). Built on row_pass-inl.h.
// Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_ROW_MOMENTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_ROW_MOMENTS_INL_H_
#undef NORMD_KERNELS_CPU_ROW_MOMENTS_INL_H_
#else
#define NORMD_KERNELS_CPU_ROW_MOMENTS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/row_pass-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// buf[i, n) (fewer than a vector) followed by zeros, for a whole-vector load.
struct TailFloats {
  alignas(64) float v[64];
};
inline TailFloats TailCopy(const float* buf, int64_t i, int64_t n) {
  TailFloats t = {};
  std::memcpy(t.v, buf + i, static_cast<size_t>(n - i) * sizeof(float));
  return t;
}

// Sums over buf[0, n) of c = (v - hi) - lo and of c^2, the deviations from a first
// estimate of the mean hi + lo: *sum gets the sum of c (the estimate's correction: the
// mean is hi + lo + sum / n) and the result is the sum of c^2. Deviations are formed in
// fp32 (exact near the mean), summed in fp32 blocks of eight vectors whose lanes go into
// double accumulators, as in LoadRow; a result that over- or underflowed fp32 is redone
// in double by the caller (CenteredSumsF64).
inline double CenteredSums(const float* buf, int64_t n, float hi, float lo, double* sum) {
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vhi = hn::Set(d, hi), vlo = hn::Set(d, lo);
  VD q0 = hn::Zero(dd), q1 = hn::Zero(dd), s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  const auto dev = [&](const float* p) HWY_ATTR __attribute__((always_inline)) {
    return hn::Sub(hn::Sub(hn::LoadU(d, p), vhi), vlo);
  };
  const auto flush = [&](V c, V c2) HWY_ATTR __attribute__((always_inline)) {
    s0 = hn::Add(s0, WideLo(c));
    s1 = hn::Add(s1, WideHi(c));
    q0 = hn::Add(q0, WideLo(c2));
    q1 = hn::Add(q1, WideHi(c2));
  };
  int64_t i = 0;
  for (; i + 8 * N <= n; i += 8 * N) {
    const float* p = buf + i;
    const V c[8] = {dev(p),         dev(p + N),     dev(p + 2 * N), dev(p + 3 * N),
                    dev(p + 4 * N), dev(p + 5 * N), dev(p + 6 * N), dev(p + 7 * N)};
    flush(SumTree8(c), SquaresTree8(c));
  }
  for (; i + N <= n; i += N) {
    const V c = dev(buf + i);
    flush(c, hn::Mul(c, c));
  }
  if (i < n) {  // through a stack copy: buf may be the caller's row, which ends at n
    const V c =
        hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(n - i)), dev(TailCopy(buf, i, n).v));
    flush(c, hn::Mul(c, c));
  }
  *sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(q0, q1)));
}

// The same sums as CenteredSums with every term in double, deviations from a double mean:
// for rows whose squares leave fp32's range, and for the channel ops, whose mean and
// variance are outputs held to the F32 rule even where the mean is small beside sigma
// (mean = 0 gives the plain sum of squares).
inline double CenteredSumsF64(const float* buf, int64_t n, double mean, double* sum) {
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VD vm = hn::Set(dd, mean);
  VD a0 = hn::Zero(dd), a1 = hn::Zero(dd), s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  const int64_t half = static_cast<int64_t>(hn::Lanes(dd));
  for (int64_t i = 0; i < n; i += N) {
    const V v = i + N <= n ? hn::LoadU(d, buf + i) : hn::LoadU(d, TailCopy(buf, i, n).v);
    VD l = hn::Sub(WideLo(v), vm), h = hn::Sub(WideHi(v), vm);
    if (i + N > n) {  // the last vector: lanes past n count nothing
      const int64_t live = n - i;
      l = hn::IfThenElseZero(hn::FirstN(dd, static_cast<size_t>(std::min(live, half))), l);
      h = hn::IfThenElseZero(hn::FirstN(dd, static_cast<size_t>(std::max<int64_t>(live - half, 0))),
                             h);
    }
    s0 = hn::Add(s0, l);
    a0 = hn::MulAdd(l, l, a0);
#if HWY_TARGET != HWY_SCALAR  // there WideHi is a zero vector, not an upper half
    s1 = hn::Add(s1, h);
    a1 = hn::MulAdd(h, h, a1);
#else
    (void)h;
#endif
  }
  *sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(a0, a1)));
}

inline double SumOfSquaresF64(const float* buf, int64_t n) {
  double unused;
  return CenteredSumsF64(buf, n, 0.0, &unused);
}

// Whether a sum of n squares computed in fp32 may have over- or underflowed (then it is
// redone in double): not finite, or so small that squares fell below fp32's normal range
// (denormals are flushed to zero while the kernels run).
inline bool SquaresLeftF32Range(double sum_of_squares, int64_t n) {
  return !(sum_of_squares < 1e37) || sum_of_squares < 1e-30 * static_cast<double>(n);
}

// The row's mean and sum of squared deviations from it (M2), from its fp32 copy in buf and
// its sum: a first mean from the sum, corrected by the centred pass, so the mean is within
// ~2^-23 sigma whatever the row's offset and M2 within ~2^-22 relative (`f64`: the centred
// pass in double, the mean and M2 as exact as double sums make them).
inline void RowMoments(const float* buf, int64_t n, double sum, bool f64, double* mean,
                       double* m2) {
  const double dn = static_cast<double>(n);
  double m = sum / dn;
  if (!std::isfinite(m)) {
    // fp32 block sums overflowed (|x| near fp32's limit): sum in double.
    m = 0;
    // Byte copies: buf may be the caller's f32 row read in place, which a shared-memory
    // tensor can place at any byte offset (a misaligned float load is UB; found by the
    // shared-memory fuzzer under UBSan).
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, reinterpret_cast<const char*>(buf) + i * sizeof(float), sizeof v);
      m += v;
    }
    m /= dn;
    if (!std::isfinite(m)) {
      // Inf or NaN in the row: the mean is that (an Inf mean, not Inf - Inf), M2 is NaN.
      *mean = m;
      *m2 = std::numeric_limits<double>::quiet_NaN();
      return;
    }
  }
  const float hi = static_cast<float>(m), lo = static_cast<float>(m - hi);
  double dsum = 0;
  double q = f64 ? CenteredSumsF64(buf, n, m, &dsum) : CenteredSums(buf, n, hi, lo, &dsum);
  if (!f64 && SquaresLeftF32Range(q, n)) q = CenteredSumsF64(buf, n, m, &dsum);
  *mean = m + dsum / dn;
  *m2 = std::max(0.0, q - dsum * dsum / dn);
}

// The mean and M2 from LoadRow's kMoments sums, without another pass over the row where
// they are exact enough: when the shift is within sigma / 2 of the mean (mc^2 <= var / 4,
// mc the mean of c) and c^2 stayed in fp32's range. There the errors of c (one rounding),
// of its square (one) and of the block sums (three, or four in blocks of sixteen vectors)
// put the mean within 2^-22 sigma (2^-21.5 in blocks of sixteen: 5.6 * 2^-24, |c| averaging
// at most 1.12 sigma) and M2 within 2^-21 relative, inside docs/semantics.md's 2^-20. Returns false
// otherwise (an offset first block, a constant row, Inf or NaN): then the centred pass decides
// (RowMoments, from the first estimate sum + n * shift).
inline bool OnePassMoments(const RowSums& r, int64_t n, double* mean, double* m2) {
  const double dn = static_cast<double>(n);
  const double mc = r.sum / dn;
  const double var = r.squares / dn - mc * mc;
  if (!(std::isfinite(var) && !SquaresLeftF32Range(r.squares, n) && 4 * mc * mc <= var)) {
    return false;
  }
  *mean = static_cast<double>(r.shift) + mc;
  *m2 = r.squares - r.sum * mc;
  return true;
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_ROW_MOMENTS_INL_H_
