// The epilogue of the row kernels (Highway per-target code): per row, y from the row and its
// statistics, ((x - mean) * scale [rounded] [* w] [+ b] [+ alpha * skip]) in fp32, converted
// and stored (non-temporal when large), one row at a time or two rows in cache at once.
// Built on convert-inl.h. Include after hwy/highway.h inside a translation unit that uses
// foreach_target (row_norm_simd.cc; chosen at run time by row_epilogue_pick-inl.h).
// Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_ROW_EPILOGUE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_ROW_EPILOGUE_INL_H_
#undef NORMD_KERNELS_CPU_ROW_EPILOGUE_INL_H_
#else
#define NORMD_KERNELS_CPU_ROW_EPILOGUE_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct Epilogue {
  float hi = 0, lo = 0;  // LayerNorm: the mean as hi + lo, subtracted first; else zero
  float scale = 1;
  float offset = 0;  // Gemma's, added to the weight in registers where the instantiation says (kO)
  // fp32, or the input's dtype where the instantiation reads them so (kP); not padded.
  const void* weight = nullptr;
  const void* bias = nullptr;
  const void* skip = nullptr;  // NORM_THEN_ADD: alpha * skip (the input's dtype) added last
  float alpha = 1;
  // Plain stores from the row's end back (Backwards, row_norm_simd.cc); only without
  // prefetch or streaming.
  bool backwards = false;
  // The next row's input, its first `prefetch_count` elements fetched into L2 (PrefetchL2)
  // while this one is computed and stored (nullptr: none), `prefetch_size` bytes an element; and
  // the next row's residual (nullptr: none): all of it where it is added last (kS), else
  // (h formed again, kR) as much as of the input. (A count field for the residual, making
  // this struct 96 bytes, halved QK-norm f16/bf16 at 4096x32x128, whose short rows copy it
  // four times a group; why, the profile did not show: RowStats' share doubled.)
  const char* prefetch = nullptr;
  int64_t prefetch_size = 0;
  int64_t prefetch_count = 0;
  const char* prefetch_skip = nullptr;
};
// The offset sits in what was padding: this struct is copied per row (above).
static_assert(sizeof(void*) != 8 || sizeof(Epilogue) == 80, "Epilogue grew");

// One vector of the epilogue below from x widened to fp32 (`v`, h where a residual was added
// first): the weight and bias vectors given (ignored when absent), the skip (widened from
// kIn: `skip()`, called where it is added) added last where kS. Each lane by itself, so a
// caller may hand it lanes in any order, the weight's, bias's and skip's in the same one (the
// one-loop pass's paired lanes, fused_rows.cc).
template <DType kIn, bool kCast, bool kW, bool kB, bool kS, bool kM, typename Skip>
HWY_INLINE V EpilogueOn(D d, V v, V vhi, V vs, V vlos, V w, V b, V valpha, const Skip& skip) {
  if constexpr (kM) {
    v = hn::MulAdd(hn::Sub(v, vhi), vs, vlos);
  } else {  // no mean (NoMean): the same bits, (v - +0) * s + -0 being v * s
    v = hn::Mul(v, vs);
  }
  if constexpr (kCast) v = RoundTo(d, kIn, v);
  if constexpr (kW && kB) {
    v = hn::MulAdd(v, w, b);  // one rounding where there were two
  } else if constexpr (kW) {
    v = hn::Mul(v, w);
  } else if constexpr (kB) {
    v = hn::Add(v, b);
  }
  if constexpr (kS) v = hn::MulAdd(valpha, skip(), v);
  (void)d;
  (void)w;
  (void)b;
  (void)valpha;
  (void)skip;
  return v;
}

#if HWY_TARGET != HWY_SCALAR
// The epilogue of the 2N bf16 from element i of row x in paired lanes (LoadBF16Pairs), as
// bf16 bits in memory order (BF16PairBits): the weight and bias (ignored when absent) in
// paired lanes' order (PairedParams, fused_rows-inl.h), the skip's 2N from element i added to
// x first (kR, as EpilogueValue forms h) or last (kS). Each lane's arithmetic is EpilogueOn's,
// so the bits are EpilogueValue's. The one-loop pass (fused_rows.cc) and the two passes'
// paired epilogue (paired_epilogue.cc) on AVX2.
template <bool kCast, bool kW, bool kB, bool kS, bool kR, bool kM>
HWY_INLINE hn::Vec<DU16Pairs> EpiloguePairBits(D d, const void* x, const void* skip,
                                               const float* weight, const float* bias, int64_t i,
                                               V vhi, V vs, V vlos, V valpha) {
  constexpr DType kT = DType::kBF16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  V xe, xo, se = hn::Zero(d), so = hn::Zero(d);
  LoadBF16Pairs(d, Offset(x, kT, i), &xe, &xo);
  if constexpr (kS || kR) LoadBF16Pairs(d, Offset(skip, kT, i), &se, &so);
  if constexpr (kR) {
    xe = ResidualAdd(valpha, se, xe);
    xo = ResidualAdd(valpha, so, xo);
  }
  const auto value = [&](V v, V s, int64_t k) HWY_ATTR __attribute__((always_inline)) {
    return EpilogueOn<kT, kCast, kW, kB, kS, kM>(
        d, v, vhi, vs, vlos, kW ? hn::LoadU(d, weight + k) : hn::Zero(d),
        kB ? hn::LoadU(d, bias + k) : hn::Zero(d),
        valpha, [s]() HWY_ATTR __attribute__((always_inline)) { return s; });
  };
  (void)skip;
  return BF16PairBits(d, value(xe, se, i), value(xo, so, i + N));
}
#endif

// One vector of the epilogue below: x read as kSrc at `x`, the weight and bias vectors
// given (ignored when absent), the skip read as kIn at `sk`: added last (kS) or, kR, to x
// first, forming h = alpha * skip + x again as LoadRow does (ResidualAdd: the same bits).
template <DType kIn, DType kSrc, bool kCast, bool kW, bool kB, bool kS, bool kR = false,
          bool kM = true>
HWY_INLINE V EpilogueValue(D d, const void* x, V vhi, V vs, V vlos, V w, V b, V valpha,
                           const void* sk) {
  V v = LoadAs<kSrc>(d, x);
  if constexpr (kR) v = ResidualAdd(valpha, LoadAs<kIn>(d, sk), v);
  return EpilogueOn<kIn, kCast, kW, kB, kS, kM>(
      d, v, vhi, vs, vlos, w, b, valpha,
      [ d, sk ]() HWY_ATTR __attribute__((always_inline)) { return LoadAs<kIn>(d, sk); });
}

// The epilogue in fp32, each term present known at compile time:
// ((x - hi) - lo) * scale [rounded to kIn] [* w] [+ b] [+ alpha * skip], skip read in
// kIn. docs/semantics.md allows its rounding (within 2^-20 of the terms' magnitudes) where
// a bias or residual cancels, and the cast_before_weight intermediate's neighbour.
// `stream`: the vector-aligned middle of `out` is written with non-temporal stores. The row
// is read from `src` as kSrc: the fp32 buffer or f32 row (F32), or the f16/bf16 input in
// place (kIn), widened again here rather than stored widened and loaded back; kR: with
// e.skip added to it first (a residual add's h formed again from x and skip in cache).
// !kM: the row has no mean (NoMean), x * scale. EpilogueStore picks kM. The weight and bias
// are read as kP: fp32, or f16/bf16 widened in registers (ParamsInPlace, row_plan.h); kO:
// with e.offset added to the weight there, in fp32 as docs/semantics.md forms offset + w.
template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kW, bool kB, bool kS, bool kR,
          bool kM, DType kP, bool kO>
HWY_INLINE void EpilogueRun(const void* src, int64_t n, const Epilogue& e, void* out, bool stream) {
  constexpr DType t = kOut;
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // ((x - hi) - lo) * scale as (x - hi) * scale - lo * scale, one FMA: x - hi is exact
  // near the mean (Sterbenz), and lo * scale (lo within 2^-24 of hi) rounds by a part in
  // 2^48 of hi * scale. Zero for RMSNorm and L2.
  const V vhi = hn::Set(d, e.hi), vs = hn::Set(d, e.scale);
  const V vlos = hn::Set(d, -(e.lo * e.scale));
  const V valpha = hn::Set(d, e.alpha);
  const V voffset = hn::Set(d, e.offset);
  // Locals: stores through `out` could alias `e` as far as the compiler knows.
  const void *weight = e.weight, *bias = e.bias;
  const void* skip = e.skip;
  // always_inline: a call per vector would return it through memory. The vectors are
  // captured by value, and `tail` captures by value too: where GCC did not inline `tail`,
  // the vectors' addresses escaped into it, so they lived in memory and were loaded again
  // after every store through `out` (which might alias them as far as GCC knew), four more
  // loads a vector. LayerNorm then add bf16 1x4096, one thread: 1117 -> 920 ns
  // (BENCHMARKS.md, issue 16, twenty-sixth session).
  const auto compute = [ d, vhi, vs, vlos, valpha,
                         voffset ](const void* x, const void* w, const void* b, const void* sk)
      HWY_ATTR __attribute__((always_inline)) {
    // Unaligned loads: after a streamed output's unaligned head, or reading the caller's
    // row in place (RowSource), x is not vector-aligned.
    V vw = kW ? LoadAs<kP>(d, w) : hn::Zero(d);
    if constexpr (kO) vw = hn::Add(vw, voffset);
    (void)voffset;
    return EpilogueValue<kIn, kSrc, kCast, kW, kB, kS, kR, kM>(
        d, x, vhi, vs, vlos, vw, kB ? LoadAs<kP>(d, b) : hn::Zero(d), valpha, sk);
  };
  const char* prefetch = e.prefetch;
  const int64_t psize = e.prefetch_size;
  const int64_t pcount = prefetch != nullptr ? e.prefetch_count : 0;
  const char* pskip = e.prefetch_skip;
  const int64_t scount = pskip != nullptr ? (kS ? n : pcount) : 0;
  const auto at = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    // No arithmetic on an absent (null) parameter: UB even when never read.
    return compute(Offset(src, kSrc, i), kW ? Offset(weight, kP, i) : nullptr,
                   kB ? Offset(bias, kP, i) : nullptr, kS || kR ? Offset(skip, kIn, i) : nullptr);
  };
  const size_t esize = ElementSize(t);
  // A partial vector: the row, parameters and skip from zero-padded copies (the caller's
  // arrays end at n), the result through a stack buffer.
  const auto tail = [=](int64_t i, int64_t count) HWY_ATTR {
    alignas(64) unsigned char tx[64 * 4] = {}, ts[64 * 4] = {}, part[64 * 4];
    alignas(64) unsigned char tw[64 * 4] = {}, tb[64 * 4] = {};
    const size_t params = static_cast<size_t>(count) * ElementSize(kP);
    std::memcpy(tx, Offset(src, kSrc, i), static_cast<size_t>(count) * ElementSize(kSrc));
    if constexpr (kW) std::memcpy(tw, Offset(weight, kP, i), params);
    if constexpr (kB) std::memcpy(tb, Offset(bias, kP, i), params);
    if constexpr (kS || kR) {
      std::memcpy(ts, Offset(skip, kIn, i), static_cast<size_t>(count) * ElementSize(kIn));
    }
    StoreAs<t>(d, compute(tx, tw, tb, ts), part);
    std::memcpy(Offset(out, t, i), part, static_cast<size_t>(count) * esize);
  };
  // The vectors that prefetch come first, so that the rest run without the checks. A bf16
  // row read in place prefetches a cache line a step (two vectors), the others a vector a
  // step. Alternating runs (BENCHMARKS.md, issue 16, twenty-third session): a line a step
  // took LayerNorm then add bf16 at 16384x1024 from 0.54-0.55 to 0.65-0.69 of memcpy and
  // fused add+LayerNorm bf16 at 4096x4096 from 0.75-0.80 to 0.86-0.94 (three sets of
  // rounds), but slowed the same f16 rows at 4096x4096 by 15-25%, for reasons the profile
  // did not show.
  constexpr bool kLines = kSrc == DType::kBF16;
  const int64_t fetch_end = std::max(pcount, scount);
  const auto fetch = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    if (i < pcount) PrefetchL2(prefetch + i * psize);
    if (i < scount) PrefetchL2(pskip + i * psize);
  };
  // From vector i, the vectors that prefetch, stored by `put`; returns where they end.
  const auto fetching = [&](int64_t i, const auto& put) HWY_ATTR __attribute__((always_inline)) {
    if constexpr (kLines) {
      const int64_t step = std::max<int64_t>(N, 64 / sizeof(uint16_t));
      for (; i + step <= n && i < fetch_end; i += step) {
        fetch(i);
        for (int64_t j = i; j < i + step; j += N) put(j);
      }
    } else {
      for (; i + N <= n && i < fetch_end; i += N) {
        fetch(i);
        put(i);
      }
    }
    return i;
  };
  const auto stream_at = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    StreamAs<t>(d, at(i), Offset(out, t, i));
  };
  const auto store_at = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    StoreAs<t>(d, at(i), Offset(out, t, i));
  };
  // The plain loops below are unrolled to four vectors a step (two pairs): GCC's -O2 leaves
  // them rolled, a vector a step, and such a loop's speed then hangs on where the linker puts
  // it. On a Zen 3 (AVX2), fused add+RMSNorm f32's backwards loop (six instructions, 29
  // bytes) came to straddle a 64-byte line when code elsewhere in the library changed, and
  // 8x4096 took 12.2-13.5 us a call instead of 10.2-12.0; unrolled, 9.9 (BENCHMARKS.md,
  // issue 16, eightieth and eighty-first sessions).
  int64_t i = 0;
  const int64_t head = stream ? StreamHead(out, esize, N, n) : -1;
  if constexpr (kPairedStores<t>) {
    // Two vectors a step, stored as one (StoreAs2): the same fetches as `fetching`.
    const auto fetching2 = [&](int64_t j, const auto& put2) HWY_ATTR
        __attribute__((always_inline)) {
      for (; j + 2 * N <= n && j < fetch_end; j += 2 * N) {
        fetch(j);
        if constexpr (!kLines) fetch(j + N);
        put2(j);
      }
      return j;
    };
    const auto stream2_at = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
      StreamAs2<t>(d, at(j), at(j + N), Offset(out, t, j));
    };
    const auto store2_at = [&](int64_t j) HWY_ATTR __attribute__((always_inline)) {
      StoreAs2<t>(d, at(j), at(j + N), Offset(out, t, j));
    };
    if (head >= 0) {
      if (head > 0) tail(0, head);
      i = head;
      // A pair is streamed whole-line aligned: one vector first where y is half a pair off.
      if (i + N <= n && reinterpret_cast<uintptr_t>(Offset(out, t, i)) % (2 * N * esize) != 0) {
        fetch(i);
        stream_at(i);
        i += N;
      }
#pragma GCC unroll 2
      for (i = fetching2(i, stream2_at); i + 2 * N <= n; i += 2 * N) stream2_at(i);
      if (i + N <= n) {
        fetch(i);
        stream_at(i);
        i += N;
      }
    } else if (e.backwards) {
      const int64_t whole = n / N * N;
      if (whole < n) tail(whole, n - whole);
      int64_t j = whole - 2 * N;
#pragma GCC unroll 2
      for (; j >= 0; j -= 2 * N) store2_at(j);
      if (j + N == 0) store_at(0);
      i = n;
    }
#pragma GCC unroll 2
    for (i = fetching2(i, store2_at); i + 2 * N <= n; i += 2 * N) store2_at(i);
    if (i + N <= n) {
      fetch(i);
      store_at(i);
      i += N;
    }
  } else {
    if (head >= 0) {
      if (head > 0) tail(0, head);
#pragma GCC unroll 4
      for (i = fetching(head, stream_at); i + N <= n; i += N) stream_at(i);
    } else if (e.backwards) {
      const int64_t whole = n / N * N;
      if (whole < n) tail(whole, n - whole);
#pragma GCC unroll 4
      for (int64_t j = whole - N; j >= 0; j -= N) store_at(j);
      i = n;
    }
#pragma GCC unroll 4
    for (i = fetching(i, store_at); i + N <= n; i += N) store_at(i);
  }
  if (i < n) tail(i, n - i);
  (void)weight;
  (void)bias;
  (void)skip;
}

// Whether a row's epilogue has no mean to subtract: hi +0 and -(lo * scale) -0 (RMSNorm and
// L2, or a zero mean), where (v - hi) * scale + -(lo * scale) is v * scale to the bit, signed
// zeros included, and one multiply does for a subtraction and an FMA.
// Measured in cache (BENCHMARKS.md, issue 16, twenty-third session, one thread, 8x4096):
// RMSNorm f16/bf16 +27-43%, L2 +40-60%, fused add+RMSNorm f16/bf16 +6-18%; f32 RMSNorm
// +1-7%; memory-bound rows within their spread.
inline bool NoMean(const Epilogue& e) {
  const float los = -(e.lo * e.scale);
  uint32_t hi_bits, los_bits;
  std::memcpy(&hi_bits, &e.hi, sizeof hi_bits);
  std::memcpy(&los_bits, &los, sizeof los_bits);
  return hi_bits == 0 && los_bits == 0x80000000u;
}

template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kW, bool kB, bool kS, bool kR = false,
          DType kP = DType::kF32, bool kO = false>
void EpilogueStore(const void* src, int64_t n, const Epilogue& e, void* out, bool stream) {
  // RMSNorm and L2 have no bias: rows with one (LayerNorm) do without the second copy.
  if constexpr (!kB) {
    if (NoMean(e)) {
      return EpilogueRun<kOut, kIn, kSrc, kCast, kW, kB, kS, kR, false, kP, kO>(src, n, e, out,
                                                                                stream);
    }
  }
  EpilogueRun<kOut, kIn, kSrc, kCast, kW, kB, kS, kR, true, kP, kO>(src, n, e, out, stream);
}

using EpilogueStoreFn = void (*)(const void* src, int64_t n, const Epilogue& e, void* out,
                                 bool stream);

// EpilogueStore of two rows at once, with plain stores (rows in cache), each weight and bias
// vector loaded once for both (for any terms; RowNormRowsImpl pairs rows with both): with a weight
// and a bias, a 4096-wide f32 row's x, w, b and y are 64 KiB, more than this core's 48 KiB L1, so
// that w and b came from L2 for every row (LayerNorm f32 16x2048 ran 24% faster than 8x4096, the
// same bytes). Per element the arithmetic is EpilogueStore's, so the outputs are the same bits.
template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kW, bool kB, bool kS,
          DType kP = DType::kF32>
void EpilogueStore2(const void* src0, const void* src1, int64_t n, const Epilogue& e0,
                    const Epilogue& e1, void* out0, void* out1) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vhi0 = hn::Set(d, e0.hi), vs0 = hn::Set(d, e0.scale),
          vlos0 = hn::Set(d, -(e0.lo * e0.scale));
  const V vhi1 = hn::Set(d, e1.hi), vs1 = hn::Set(d, e1.scale),
          vlos1 = hn::Set(d, -(e1.lo * e1.scale));
  const V valpha = hn::Set(d, e0.alpha);
  const void *weight = e0.weight, *bias = e0.bias;
  const void *skip0 = e0.skip, *skip1 = e1.skip;
  const int64_t whole = n / N * N;
  // Both rows' vectors at i.
  const auto values = [&](int64_t i, V * y0, V * y1) HWY_ATTR __attribute__((always_inline)) {
    // Loaded once for both rows (InRegister).
    const V w = kW ? InRegister(LoadAs<kP>(d, Offset(weight, kP, i))) : hn::Zero(d);
    const V b = kB ? InRegister(LoadAs<kP>(d, Offset(bias, kP, i))) : hn::Zero(d);
    *y0 = EpilogueValue<kIn, kSrc, kCast, kW, kB, kS>(d, Offset(src0, kSrc, i), vhi0, vs0, vlos0, w,
                                                      b, valpha,
                                                      kS ? Offset(skip0, kIn, i) : nullptr);
    *y1 = EpilogueValue<kIn, kSrc, kCast, kW, kB, kS>(d, Offset(src1, kSrc, i), vhi1, vs1, vlos1, w,
                                                      b, valpha,
                                                      kS ? Offset(skip1, kIn, i) : nullptr);
  };
  const auto pair = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    V y0, y1;
    values(i, &y0, &y1);
    StoreAs<kOut>(d, y0, Offset(out0, kOut, i));
    StoreAs<kOut>(d, y1, Offset(out1, kOut, i));
  };
  if constexpr (kPairedStores<kOut>) {
    // Two vectors of each row a step, each row's stored as one (StoreAs2).
    const auto quad = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
      V y0, y1, z0, z1;
      values(i, &y0, &y1);
      values(i + N, &z0, &z1);
      StoreAs2<kOut>(d, y0, z0, Offset(out0, kOut, i));
      StoreAs2<kOut>(d, y1, z1, Offset(out1, kOut, i));
    };
    const int64_t pairs = n / (2 * N) * (2 * N);
    if (e0.backwards) {
      if (pairs < whole) pair(pairs);
      for (int64_t i = pairs - 2 * N; i >= 0; i -= 2 * N) quad(i);
    } else {
      for (int64_t i = 0; i < pairs; i += 2 * N) quad(i);
      if (pairs < whole) pair(pairs);
    }
  } else if (e0.backwards) {
    for (int64_t i = whole - N; i >= 0; i -= N) pair(i);
  } else {
    for (int64_t i = 0; i < whole; i += N) pair(i);
  }
  // The partial last vector, row by row, as EpilogueStore's tail.
  if (const int64_t i = whole; i < n) {
    for (int k = 0; k < 2; ++k) {
      Epilogue e = k == 0 ? e0 : e1;
      if constexpr (kW) e.weight = Offset(weight, kP, i);
      if constexpr (kB) e.bias = Offset(bias, kP, i);
      if constexpr (kS) e.skip = Offset(e.skip, kIn, i);
      e.prefetch = nullptr;
      EpilogueStore<kOut, kIn, kSrc, kCast, kW, kB, kS, false, kP>(
          Offset(k == 0 ? src0 : src1, kSrc, i), n - i, e, Offset(k == 0 ? out0 : out1, kOut, i),
          false);
    }
  }
  (void)weight;
  (void)bias;
  (void)skip0;
  (void)skip1;
}

using EpilogueStore2Fn = void (*)(const void* src0, const void* src1, int64_t n, const Epilogue& e0,
                                  const Epilogue& e1, void* out0, void* out1);

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_ROW_EPILOGUE_INL_H_
