// RMSNorm and L2Norm of narrow rows without a residual (QK-norm's heads of 64-256 columns),
// Highway per-target code: four rows' sums of squares and inverse scales, then their
// outputs, in one function per combination of terms, with nothing between a row's load and
// its store but registers and L1. Row by row through RowNormRowsImpl's general passes, a
// 128-column f16 row cost as long as an f32 one (27 ns): the calls through function
// pointers, the epilogue's setup and the statistics' chain of divisions were most of it.
// QK-norm f16/bf16 at 4096x32x128, one thread, five alternating runs: 19-20 -> 40-42 GB/s,
// 0.43-0.45 -> 0.95-0.96 of memcpy (BENCHMARKS.md, issue 16, twenty-first session). The
// arithmetic is the general passes', in their order, so the outputs are the same bits
// (narrow_rows_test checks it). f32 rows came later: on that VM they ran 5-16% faster here
// on one thread but 8-13% slower on two, so they stayed on the general passes; on the Intel
// VM, with the fetch ahead (kNarrowAheadBytes), four alternating rounds, one thread / two,
// QK-norm f32 4096x32x128 12.1 / 23.0 -> 14.4 / 28.2 GB/s, 0.71 / 0.71 -> 0.88 / 0.85 of
// memcpy (BENCHMARKS.md, issue 16, sixtieth session).
// Include after hwy/highway.h and row_pass-inl.h inside row_norm_simd.cc and narrow_rows.cc
// (which instantiates it). Stateless; safe from any thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_NARROW_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_NARROW_ROWS_INL_H_
#undef NORMD_KERNELS_CPU_NARROW_ROWS_INL_H_
#else
#define NORMD_KERNELS_CPU_NARROW_ROWS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hwy/cache_control.h"
#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/row_epilogue-inl.h"
#include "kernels/cpu/row_moments-inl.h"
#include "kernels/cpu/row_norm_simd.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The widest row taken here: 256 columns, 16 vectors of AVX-512 (32 of AVX2), read twice
// from L1. Only 128 columns were measured; the general passes' costs per row are spread
// over more columns in wider rows, which they take in groups (kShortRowCols).
constexpr int64_t kNarrowCols = 256;
// Groups of eight (a whole AVX-512 vector of doubles for the scales) measured the same on
// one thread and 5% slower on two.
constexpr int kNarrowGroup = 4;

// Whether rows of `a` go through NarrowRows: RMSNorm over the whole row or L2Norm, no
// residual, the output in the input's dtype, and a whole number of vectors per row.
inline bool NarrowEligible(const RowNormArgs& a, int64_t stat_cols) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(D()));
  return (a.kind == RowNormKind::kRms || a.kind == RowNormKind::kL2) &&
         a.residual == ResidualPlacement::kNone && !a.h.present() && stat_cols == a.cols &&
         a.y.dtype == a.x.dtype && a.cols <= kNarrowCols && a.cols % N == 0;
}

// Rows [begin, end) the general way: for a group whose squares left fp32's range.
using GeneralRowsFn = void (*)(const RowNormArgs& a, const RowParams& p, int64_t begin,
                               int64_t end);

// The sum of squares of one row, as LoadRow<kT, kSumOfSquares> forms it: blocks of eight
// vectors summed pairwise in fp32, each block's lanes added into double, then single vectors.
template <DType kT>
HWY_INLINE double NarrowSumOfSquares(const void* x, int64_t n) {
  const D d;
  const DD dd;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VD s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  const auto sq = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    const V v = LoadAs<kT>(d, Offset(x, kT, i));
    return hn::Mul(v, v);
  };
  int64_t i = 0;
  for (; i + 8 * N <= n; i += 8 * N) {
    const V s = hn::Add(
        hn::Add(hn::Add(sq(i), sq(i + N)), hn::Add(sq(i + 2 * N), sq(i + 3 * N))),
        hn::Add(hn::Add(sq(i + 4 * N), sq(i + 5 * N)), hn::Add(sq(i + 6 * N), sq(i + 7 * N))));
    s0 = hn::Add(s0, WideLo(s));
    s1 = hn::Add(s1, WideHi(s));
  }
  for (; i < n; i += N) {
    const V s = sq(i);
    s0 = hn::Add(s0, WideLo(s));
    s1 = hn::Add(s1, WideHi(s));
  }
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
}

// A group's inverse scales, or !ok when a row's squares left fp32's range (the caller
// then takes the group the general way).
template <int kG>
struct NarrowStats {
  float scale[kG];
  bool ok;
};

template <int kG, DType kT>
HWY_INLINE NarrowStats<kG> NarrowGroupStats(const RowNormArgs& a, int64_t r) {
  const int64_t n = a.cols;
  double sum[kG];
  for (int k = 0; k < kG; ++k)
    sum[k] = NarrowSumOfSquares<kT>(Offset(a.x.data, kT, (r + k) * n), n);
  NarrowStats<kG> st;
  st.ok = true;
  for (int k = 0; k < kG; ++k) st.ok &= !SquaresLeftF32Range(sum[k], n);
  // RowStats' formulas in the same double operations, kG rows to a vector: four rows' scalar
  // divisions and square roots kept the divider busy for longer than their stores took.
  const hn::CappedTag<double, kG> dg;
  const size_t L = hn::Lanes(dg);
  const auto eps = hn::Set(dg, a.eps);
  const auto one = hn::Set(dg, 1.0);
  for (size_t k = 0; k < static_cast<size_t>(kG); k += L) {
    auto v = hn::LoadU(dg, sum + k);
    if (a.kind == RowNormKind::kRms) {
      const auto ms = hn::Div(v, hn::Set(dg, static_cast<double>(n)));
      v = a.eps_placement == EpsPlacement::kInsideSqrt ? hn::Div(one, hn::Sqrt(hn::Add(ms, eps)))
                                                       : hn::Div(one, hn::Add(hn::Sqrt(ms), eps));
    } else {
      // std::max(root, eps): eps where the root is less (a NaN root stays NaN).
      const auto root = hn::Sqrt(v);
      v = hn::Div(one, hn::IfThenElse(hn::Lt(root, eps), eps, root));
    }
    hn::StoreU(hn::DemoteTo(hn::Rebind<float, decltype(dg)>(), v),
               hn::Rebind<float, decltype(dg)>(), st.scale + k);
  }
  return st;
}

// One row's output from its scale: EpilogueStore's no-mean arithmetic (EpilogueValue,
// !kM), stored, or streamed (kStream: y vector-aligned).
template <bool kStream, DType kT, bool kCast, bool kW, bool kB>
HWY_INLINE void NarrowRowStore(const void* x, int64_t n, float scale, const float* w,
                               const float* b, void* y) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V vs = hn::Set(d, scale), zero = hn::Zero(d);
  const auto value = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    return EpilogueValue<kT, kT, kCast, kW, kB, /*kS=*/false, /*kR=*/false, /*kM=*/false>(
        d, Offset(x, kT, i), zero, vs, zero, kW ? hn::LoadU(d, w + i) : zero,
        kB ? hn::LoadU(d, b + i) : zero, zero, nullptr);
  };
  // Pairs of vectors stored as one (StoreAs2) where the row is a whole number of pairs and,
  // streamed, starts on one.
  if (kPairedStores<kT> && n % (2 * N) == 0 &&
      (!kStream || reinterpret_cast<uintptr_t>(y) % (2 * N * ElementSize(kT)) == 0)) {
    for (int64_t i = 0; i < n; i += 2 * N) {
      if constexpr (kStream) {
        StreamAs2<kT>(d, value(i), value(i + N), Offset(y, kT, i));
      } else {
        StoreAs2<kT>(d, value(i), value(i + N), Offset(y, kT, i));
      }
    }
    (void)w;
    (void)b;
    return;
  }
  for (int64_t i = 0; i < n; i += N) {
    const V v = value(i);
    if constexpr (kStream) {
      StreamAs<kT>(d, v, Offset(y, kT, i));
    } else {
      StoreAs<kT>(d, v, Offset(y, kT, i));
    }
  }
  (void)w;
  (void)b;
}

// The outputs of kG rows from `r`.
template <int kG, DType kT, bool kCast, bool kW, bool kB>
HWY_INLINE void NarrowGroupStore(const RowNormArgs& a, const RowParams& p, int64_t r,
                                 const NarrowStats<kG>& st) {
  const int64_t n = a.cols;
  const size_t esize = ElementSize(kT);
  // Highway's Stream needs the whole stored vector aligned; rows start aligned when the
  // output does (n is a multiple of N), so all or none of a call's rows stream.
  const bool stream =
      p.stream && reinterpret_cast<uintptr_t>(a.y.data) % (hn::Lanes(D()) * esize) == 0;
  // fp32: narrow rows are taken only with fp32 parameters (RowNormRowsImpl).
  const float* weight = static_cast<const float*>(p.weight);
  const float* bias = static_cast<const float*>(p.bias);
  for (int k = 0; k < kG; ++k) {
    const void* x = Offset(a.x.data, kT, (r + k) * n);
    void* y = Offset(a.y.data, kT, (r + k) * n);
    if (stream) {
      NarrowRowStore<true, kT, kCast, kW, kB>(x, n, st.scale[k], weight, bias, y);
    } else {
      NarrowRowStore<false, kT, kCast, kW, kB>(x, n, st.scale[k], weight, bias, y);
    }
  }
}

// How far ahead of the group being summed a streamed call fetches its rows into L2. On the
// twenty-first session's VM, fetching two groups ahead (into L1) cost 12-15% on one thread
// and gained 2-8% on two: its hardware prefetchers kept up with the sequential read. On the
// Intel VM of the later sessions the first load of each row held a quarter of the loop's
// samples; one thread / two, four alternating rounds, QK-norm 4096x32x128, kernel GB/s
// medians (BENCHMARKS.md, issue 16, sixtieth session): f16 9.1 / 16.9 -> 10.8 / 19.7, bf16
// 9.0 / 16.9 -> 10.1 / 16.9 at 8 KiB; 4, 12 and 16 KiB measured too, 8 KiB as good or better.
constexpr int64_t kNarrowAheadBytes = 8 << 10;

// Groups of kNarrowGroup rows, software-pipelined: the next group's statistics are issued
// before this group's outputs, so that their chains of long latencies (the lanes' sums, a
// square root and two divisions) run beside this group's stores instead of ahead of them
// (one thread, 32-34 -> 34.5-35.6 GB/s). Streamed calls fetch ahead (kNarrowAheadBytes).
template <DType kT, bool kCast, bool kW, bool kB>
void NarrowRowsT(const RowNormArgs& a, const RowParams& p, int64_t begin, int64_t end,
                 GeneralRowsFn general) {
  constexpr int kG = kNarrowGroup;
  // Streamed calls read their rows from memory: fetch kNarrowAheadBytes ahead (above).
  const int64_t group_bytes = kG * a.cols * static_cast<int64_t>(ElementSize(kT));
  const bool fetch = p.stream;
  int64_t r = begin;
  if (r + kG <= end) {
    NarrowStats<kG> cur = NarrowGroupStats<kG, kT>(a, r);
    for (;; r += kG) {
      const bool more = r + 2 * kG <= end;
      if (fetch) {
        // The group kNarrowAheadBytes past the next one; past the last row the fetches touch
        // memory that is not read, and a prefetch cannot fault.
        const uintptr_t at = reinterpret_cast<uintptr_t>(Offset(a.x.data, kT, (r + kG) * a.cols)) +
                             kNarrowAheadBytes;
        for (int64_t l = 0; l < group_bytes; l += 64) {
          PrefetchL2(reinterpret_cast<const void*>(at + static_cast<uintptr_t>(l)));
        }
      }
      NarrowStats<kG> next;
      if (more) next = NarrowGroupStats<kG, kT>(a, r + kG);
      if (cur.ok) {
        NarrowGroupStore<kG, kT, kCast, kW, kB>(a, p, r, cur);
      } else {
        general(a, p, r, r + kG);
      }
      if (!more) break;
      cur = next;
    }
    r += kG;
  }
  for (; r < end; ++r) {
    const NarrowStats<1> st = NarrowGroupStats<1, kT>(a, r);
    if (st.ok) {
      NarrowGroupStore<1, kT, kCast, kW, kB>(a, p, r, st);
    } else {
      general(a, p, r, r + 1);
    }
  }
  if (p.stream) hwy::FlushStream();
}

using NarrowRowsFn = void (*)(const RowNormArgs& a, const RowParams& p, int64_t begin, int64_t end,
                              GeneralRowsFn general);

template <DType kT, bool kCast>
NarrowRowsFn PickNarrowRows(bool w, bool b) {
  if (w) return b ? NarrowRowsT<kT, kCast, true, true> : NarrowRowsT<kT, kCast, true, false>;
  return b ? NarrowRowsT<kT, kCast, false, true> : NarrowRowsT<kT, kCast, false, false>;
}

// Instantiated once a target in narrow_rows.cc, apart from row_norm_simd.cc, so that a build
// compiles them side by side.
extern template NarrowRowsFn PickNarrowRows<DType::kF32, false>(bool, bool);
extern template NarrowRowsFn PickNarrowRows<DType::kF16, false>(bool, bool);
extern template NarrowRowsFn PickNarrowRows<DType::kF16, true>(bool, bool);
extern template NarrowRowsFn PickNarrowRows<DType::kBF16, false>(bool, bool);
extern template NarrowRowsFn PickNarrowRows<DType::kBF16, true>(bool, bool);

// REQUIRES: NarrowEligible(a, ...).
inline NarrowRowsFn PickNarrowRows(const RowNormArgs& a, const RowParams& p) {
  // cast_before_weight rounds x * scale to the input's dtype before the weight (RMSNorm).
  const bool cast = a.kind == RowNormKind::kRms && a.cast_before_weight;
  const bool w = p.weight != nullptr, b = p.bias != nullptr;
  // f32: rounding to f32 changes nothing; the form without the cast gives the same bits.
  if (a.x.dtype == DType::kF32) return PickNarrowRows<DType::kF32, false>(w, b);
  if (a.x.dtype == DType::kF16) {
    return cast ? PickNarrowRows<DType::kF16, true>(w, b)
                : PickNarrowRows<DType::kF16, false>(w, b);
  }
  return cast ? PickNarrowRows<DType::kBF16, true>(w, b)
              : PickNarrowRows<DType::kBF16, false>(w, b);
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_NARROW_ROWS_INL_H_
