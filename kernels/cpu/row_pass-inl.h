// SIMD passes over one row shared by the CPU kernels (Highway per-target code): the fused
// load-and-reduce pass (widening into an fp32 buffer, with the residual add) and the
// centred pass that turns a first mean into the row's moments. Built on convert-inl.h.
// Include after hwy/highway.h inside a translation unit that uses foreach_target.
// Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_ROW_PASS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_ROW_PASS_INL_H_
#undef NORMD_KERNELS_CPU_ROW_PASS_INL_H_
#else
#define NORMD_KERNELS_CPU_ROW_PASS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- passes over one row --------------------------------------------------------------

// kMoments: the sum of c = x - shift and of c^2, shift the mean of the row's first block
// (RowSums), for LayerNorm's statistics in one pass (OnePassMoments).
enum class Stat { kNone, kSum, kSumOfSquares, kMoments };

struct RowSums {
  double sum = 0;      // kSum: of x; kSumOfSquares: of x^2 over [0, m); kMoments: of c
  double squares = 0;  // kMoments: of c^2
  float shift = 0;     // kMoments: c = x - shift
};

// The sum of eight vectors of terms c, and the sum of their squares, as pairwise trees
// (three roundings a lane, one more for a square): LoadRow's blocks, CenteredSums', the
// one-loop pass's (fused_rows.cc), which must give LoadRow's bits, and the channel ops'
// groups of eight rows (shifted_sums-inl.h).
HWY_INLINE V SumTree8(const V* c) {
  return hn::Add(hn::Add(hn::Add(c[0], c[1]), hn::Add(c[2], c[3])),
                 hn::Add(hn::Add(c[4], c[5]), hn::Add(c[6], c[7])));
}
HWY_INLINE V SquaresTree8(const V* c) {
  return hn::Add(hn::Add(hn::MulAdd(c[0], c[0], hn::Mul(c[1], c[1])),
                         hn::MulAdd(c[2], c[2], hn::Mul(c[3], c[3]))),
                 hn::Add(hn::MulAdd(c[4], c[4], hn::Mul(c[5], c[5])),
                         hn::MulAdd(c[6], c[6], hn::Mul(c[7], c[7]))));
}

// The sums of sixteen vectors of terms c and of their squares, as pairwise trees (four
// roundings a lane, one more for a square), into *s and *s2.
HWY_INLINE void SumTree16(const V* c, V* s, V* s2) {
  V t[8], t2[8];
  // Unrolled, so that the arrays become registers (GCC keeps them in memory otherwise).
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    t[j] = hn::Add(c[2 * j], c[2 * j + 1]);
    t2[j] = hn::MulAdd(c[2 * j], c[2 * j], hn::Mul(c[2 * j + 1], c[2 * j + 1]));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[j] = hn::Add(t[2 * j], t[2 * j + 1]);
    t2[j] = hn::Add(t2[2 * j], t2[2 * j + 1]);
  }
  *s = hn::Add(hn::Add(t[0], t[1]), hn::Add(t[2], t[3]));
  *s2 = hn::Add(hn::Add(t2[0], t2[1]), hn::Add(t2[2], t2[3]));
}

// Widens n elements of x (plus alpha * skip when skip is given) into buf, writing whole
// vectors (the padded tail lanes are zero), and h when given, and returns the row's sums
// in double (RowSums).
//
// The sums run in fp32 over blocks of eight vectors (a pairwise tree: three roundings per
// lane; f16/bf16 moments sixteen, four roundings) and each block's lanes are added into
// double accumulators: the error stays within
// ~2^-22 of the sum of the terms' magnitudes whatever the row's length, at a fraction of the
// cost of widening every element to double. A sum of squares that overflows or underflows fp32
// (|x| beyond ~1e19 or below ~1e-19) is redone in double by the caller (SumOfSquaresF64).
// kMoments' shift is the fp32 mean of the first min(8, n / N) whole vectors (zero when the
// row is shorter than a vector): close to the row's mean, so c is small and exact.
// !kBuf: nothing is written to buf (the later passes read a row without a residual add in
// place, widening it again, and an f32 h: the store would only fill the cache).
// kStreamH: h goes out with non-temporal stores (REQUIRES: h's row vector-aligned).
template <DType kT, Stat kStat, bool kSkip, bool kH, bool kBuf = true, bool kStreamH = false>
RowSums LoadRow(const void* x, const void* skip, float alpha, int64_t n, float* buf, int64_t m,
                void* h) {
  constexpr DType t = kT, ht = kT;
  constexpr Stat stat = kStat;
  constexpr bool moments = stat == Stat::kMoments;
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VD s0 = hn::Zero(dd), s1 = hn::Zero(dd), q0 = hn::Zero(dd), q1 = hn::Zero(dd);
  const V va = hn::Set(d, alpha);
  const auto value = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    V v = LoadAs<t>(d, Offset(x, t, i));
    if constexpr (kSkip) v = ResidualAdd(va, LoadAs<t>(d, Offset(skip, t, i)), v);
    return v;
  };
  RowSums out;
  if constexpr (moments) {
    const int64_t w = std::min<int64_t>(8, n / N);
    if (w > 0) {
      V acc = value(0);
      for (int64_t j = 1; j < w; ++j) acc = hn::Add(acc, value(j * N));
      out.shift = hn::GetLane(hn::SumOfLanes(d, acc)) / static_cast<float>(w * N);
    }
  }
  const V vk = hn::Set(d, out.shift);
  const auto load = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    const V v = value(i);
    if constexpr (kH && kStreamH) {
      StreamAs<ht>(d, v, Offset(h, ht, i));
    } else if constexpr (kH) {
      StoreAs<ht>(d, v, Offset(h, ht, i));
    }
    if constexpr (kBuf) hn::Store(v, d, buf + i);
    return v;
  };
  // The summed term: x, x^2, or c = x - shift (whose square is formed in the block).
  const auto term = [&](V v) HWY_ATTR __attribute__((always_inline)) {
    if constexpr (stat == Stat::kSumOfSquares) {
      return hn::Mul(v, v);
    } else if constexpr (moments) {
      return hn::Sub(v, vk);
    } else {
      return v;
    }
  };
  // Two vectors' terms from element i, a bf16 h stored as one pair where the target rounds
  // two vectors at once (StoreAs2, the bits of two StoreAs): vcvtne2ps2bf16 on AVX3_DL, a
  // pack on AVX2. Not f16: on AVX2 its pair is two stores, and the pairs' loop ran slower.
  constexpr bool kPairH = kH && !kStreamH && ht == DType::kBF16 && kPairedStores<ht>;
  struct Terms {
    V a, b;
  };
  const auto load2 = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    const V v0 = value(i), v1 = value(i + N);
    if constexpr (kPairH) StoreAs2<ht>(d, v0, v1, Offset(h, ht, i));
    if constexpr (kBuf) {
      hn::Store(v0, d, buf + i);
      hn::Store(v1, d, buf + i + N);
    }
    return Terms{term(v0), term(v1)};
  };
  const auto flush = [&](V a, V a2) HWY_ATTR __attribute__((always_inline)) {
    s0 = hn::Add(s0, WideLo(a));
    s1 = hn::Add(s1, WideHi(a));
    if constexpr (moments) {
      q0 = hn::Add(q0, WideLo(a2));
      q1 = hn::Add(q1, WideHi(a2));
    }
  };
  // Elements [0, end) enter the statistic.
  const int64_t end = stat == Stat::kNone ? 0 : (stat == Stat::kSumOfSquares ? m : n);
  int64_t i = 0;
  if constexpr (moments && t != DType::kF32) {
    // f16/bf16 moments in blocks of sixteen vectors: the widening of block sums to double
    // half as often (BENCHMARKS.md, issue 16, twenty-fourth session: LayerNorm f16/bf16 one
    // thread +3-13% on a Zen 4; f32 ran 3-10% slower and keeps blocks of eight).
    for (; i + 16 * N <= end; i += 16 * N) {
      V c[16], s, s2;
      if constexpr (kPairH) {
#pragma GCC unroll 8
        for (int j = 0; j < 16; j += 2) {
          const Terms t2 = load2(i + j * N);
          c[j] = t2.a;
          c[j + 1] = t2.b;
        }
      } else {
        // Unrolled, so that the array becomes registers (GCC keeps it in memory otherwise).
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) c[j] = term(load(i + j * N));
      }
      SumTree16(c, &s, &s2);
      flush(s, s2);
    }
  }
  for (; i + 8 * N <= end; i += 8 * N) {
    if constexpr (kPairH) {
      V c[8];
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) {
        const Terms t2 = load2(i + j * N);
        c[j] = t2.a;
        c[j + 1] = t2.b;
      }
      const V s = SumTree8(c);
      flush(s, moments ? SquaresTree8(c) : s);
    } else {
      const V c[8] = {term(load(i)),         term(load(i + N)),     term(load(i + 2 * N)),
                      term(load(i + 3 * N)), term(load(i + 4 * N)), term(load(i + 5 * N)),
                      term(load(i + 6 * N)), term(load(i + 7 * N))};
      const V s = SumTree8(c);
      flush(s, moments ? SquaresTree8(c) : s);
    }
  }
  const auto single = [&](V v, int64_t at) HWY_ATTR __attribute__((always_inline)) {
    if (stat == Stat::kNone || at >= end) return;
    V c = term(v);
    if (at + N > end) c = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(end - at)), c);
    flush(c, hn::Mul(c, c));
  };
  for (; i + N <= n; i += N) single(load(i), i);
  if (i < n) {
    // The tail goes through zeroed stack copies: a partial vector load could fault.
    alignas(64) unsigned char tx[64 * 4] = {}, ts[64 * 4] = {};
    const size_t bytes = static_cast<size_t>(n - i) * ElementSize(t);
    std::memcpy(tx, Offset(x, t, i), bytes);
    V v = LoadAs<t>(d, tx);
    if constexpr (kSkip) {
      std::memcpy(ts, Offset(skip, t, i), bytes);
      v = ResidualAdd(va, LoadAs<t>(d, ts), v);
    }
    if constexpr (kH) {
      StoreAs<ht>(d, v, tx);
      std::memcpy(Offset(h, ht, i), tx, static_cast<size_t>(n - i) * ElementSize(ht));
    }
    if constexpr (kBuf) hn::Store(v, d, buf + i);
    single(v, i);
  }
  (void)skip;
  (void)h;
  (void)m;
  (void)buf;
  if constexpr (stat != Stat::kNone) {
    out.sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
    if constexpr (moments) out.squares = hn::GetLane(hn::SumOfLanes(dd, hn::Add(q0, q1)));
  }
  return out;
}

using LoadRowFn = RowSums (*)(const void* x, const void* skip, float alpha, int64_t n, float* buf,
                              int64_t m, void* h);

template <DType kT, Stat kStat>
LoadRowFn PickLoadRow(bool skip, bool h, bool buf, bool stream_h) {
  if (!skip) {
    return buf ? &LoadRow<kT, kStat, false, false> : &LoadRow<kT, kStat, false, false, false>;
  }
  if (!h) return buf ? &LoadRow<kT, kStat, true, false> : &LoadRow<kT, kStat, true, false, false>;
  // f32 rows read their h back (no buf), so only f16/bf16 stream it; without a buffer
  // their epilogue forms h again from x and skip.
  if constexpr (kT != DType::kF32) {
    if (stream_h) {
      return buf ? &LoadRow<kT, kStat, true, true, true, true>
                 : &LoadRow<kT, kStat, true, true, false, true>;
    }
  }
  if (!buf) return &LoadRow<kT, kStat, true, true, false>;
  return &LoadRow<kT, kStat, true, true>;
}

template <DType kT>
LoadRowFn PickLoadRow(Stat stat, bool skip, bool h, bool buf, bool stream_h) {
  switch (stat) {
    case Stat::kNone:
      return PickLoadRow<kT, Stat::kNone>(skip, h, buf, stream_h);
    case Stat::kSum:
      return PickLoadRow<kT, Stat::kSum>(skip, h, buf, stream_h);
    case Stat::kSumOfSquares:
      return PickLoadRow<kT, Stat::kSumOfSquares>(skip, h, buf, stream_h);
    case Stat::kMoments:
      return PickLoadRow<kT, Stat::kMoments>(skip, h, buf, stream_h);
  }
  return nullptr;
}

// Instantiated once a target in row_pass.cc, apart from the kernels that call them
// (row_norm_simd.cc, channel_norm_simd.cc), so that a build compiles them side by side.
extern template LoadRowFn PickLoadRow<DType::kF32>(Stat, bool, bool, bool, bool);
extern template LoadRowFn PickLoadRow<DType::kF16>(Stat, bool, bool, bool, bool);
extern template LoadRowFn PickLoadRow<DType::kBF16>(Stat, bool, bool, bool, bool);

// `buf` false: LoadRow writes nothing to buf (the caller reads x, an f32 h, or x and skip
// to form h again).
// `stream_h`: an f16/bf16 h streams (REQUIRES: h's rows vector-aligned); f32 ignores it.
inline LoadRowFn PickLoadRow(DType t, Stat stat, bool skip, bool h, bool buf = true,
                             bool stream_h = false) {
  switch (t) {
    case DType::kF32:
      return PickLoadRow<DType::kF32>(stat, skip, h, buf, stream_h);
    case DType::kF16:
      return PickLoadRow<DType::kF16>(stat, skip, h, buf, stream_h);
    case DType::kBF16:
      return PickLoadRow<DType::kBF16>(stat, skip, h, buf, stream_h);
  }
  return nullptr;
}

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

#endif  // NORMD_KERNELS_CPU_ROW_PASS_INL_H_
