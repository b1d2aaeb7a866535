// SIMD passes over one row shared by the CPU kernels (Highway per-target code): the fused
// load-and-reduce pass (widening into an fp32 buffer, with the residual add) and its sums'
// trees; the moments made from them are in row_moments-inl.h. Built on convert-inl.h.
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
#include <cstring>

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

// c = v - k, the shifted term of kMoments sums, formed as v * 1 + (-k) with `neg_k` = -k:
// the same bits (v * 1 is exact, one rounding either way, signed zeros alike), but on the
// multiply-add pipes. On Zen 4 and 5 additions have two pipes and multiply-adds two others,
// and a moments pass is all additions but its squares: a bf16 row's sums of 4096 elements
// in L1 took 315-351 ns with the subtraction and 262-293 with it as a multiply-add
// (BENCHMARKS.md, issue 16, eightieth session). Where one pipe does both (Intel) it costs
// nothing; targets without FMA emulate MulAdd as a product and a sum, the same bits again.
HWY_INLINE V Shifted(V v, V neg_k) { return hn::MulAdd(v, hn::Set(D(), 1.0f), neg_k); }

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

// Rows of at least kFetchAheadMinBytes of input fetch it (and the skip they add) into L1
// kFetchAheadBytes ahead of LoadRow's blocks: such a row comes from memory (the 1024x65536
// cases, 128-256 KiB rows, tensors beyond the host's last-level cache), where one thread's
// sequential read with the hardware's prefetch alone ran at 11 GB/s, and the channel ops'
// copy-like pass (BatchNorm inference) on data from memory, with a fetch 4-8 KiB ahead, rose
// from 0.53-0.72 to 0.91-0.96 of memcpy in f16 and from 0.59-0.64 to 0.72-0.98 in bf16. At
// 1024x65536, one thread, three alternating rounds (BENCHMARKS.md, issue 16, fifty-eighth session),
// median ratio to memcpy: LayerNorm f32 0.46 -> 0.51, RMSNorm, Gemma's and Hugging Face's f32
// 0.62-0.63 -> 0.66-0.68, fused add+RMSNorm bf16 0.58 -> 0.65, fused add+LayerNorm f16/bf16
// 0.61/0.55 -> 0.65/0.59, LayerNorm then add bf16 0.37 -> 0.46, the rest -0.02 to +0.03 (Gemma's
// f16 0.71 -> 0.65 there, 0.63 -> 0.66 in four more rounds). 8 KiB ahead gained about as much, 16
// KiB cost the fused add+RMSNorm f32/f16 0.06. Shorter rows (4096x4096 and 16384x1024: 4-16 KiB)
// are in cache or fetched by the row before them.
inline constexpr int64_t kFetchAheadBytes = 4 << 10;
inline constexpr int64_t kFetchAheadMinBytes = 64 << 10;

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
  const V neg_k = hn::Set(d, -out.shift);
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
      return Shifted(v, neg_k);
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
  // `count` elements from element `at`, kFetchAheadBytes on, into L1, a prefetch a line.
  const bool ahead = n * static_cast<int64_t>(ElementSize(t)) >= kFetchAheadMinBytes;
  const auto fetch = [&](int64_t at, int64_t count) HWY_ATTR __attribute__((always_inline)) {
    if (!ahead) return;
    const int64_t bytes = count * static_cast<int64_t>(ElementSize(t));
    const char* px = static_cast<const char*>(Offset(x, t, at)) + kFetchAheadBytes;
    for (int64_t l = 0; l < bytes; l += 64) hwy::Prefetch(px + l);
    if constexpr (kSkip) {
      const char* ps = static_cast<const char*>(Offset(skip, t, at)) + kFetchAheadBytes;
      for (int64_t l = 0; l < bytes; l += 64) hwy::Prefetch(ps + l);
    }
  };
  if constexpr (moments && t != DType::kF32) {
    // f16/bf16 moments in blocks of sixteen vectors: the widening of block sums to double
    // half as often (BENCHMARKS.md, issue 16, twenty-fourth session: LayerNorm f16/bf16 one
    // thread +3-13% on a Zen 4; f32 ran 3-10% slower and keeps blocks of eight).
    for (; i + 16 * N <= end; i += 16 * N) {
      fetch(i, 16 * N);
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
    fetch(i, 8 * N);
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

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_ROW_PASS_INL_H_
