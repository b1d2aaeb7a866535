// Highway implementation of RowNormRows. Per row: one pass loads and widens the input,
// fusing h = alpha * skip + x (and storing h), into an fp32 row buffer that stays in L1/L2
// where the row has a residual add (else the later passes read the input in place and
// widen it again, and an f32 h in place: RowSource), and sums the row's squares, or
// (LayerNorm) its deviations from a shift and their squares, which give the moments unless
// the shift was far from the mean (then a centred pass over the row corrects the mean:
// OnePassMoments); one pass computes the epilogue,
// converts and stores y (non-temporal when large). The input is read from memory once.
//
// Precision (see stats.h): values widened to fp32, sums in fp32 blocks gathered in double
// (row_pass-inl.h), so the statistics are within ~2^-22 whatever the row's offset; the
// epilogue in fp32, which docs/semantics.md allows where a bias or residual cancels.
// foreach_target.h re-includes this file once per SIMD target and must come first; the
// -inl.h follows highway.h.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_norm_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "kernels/cpu/aligned_scratch.h"
#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/row_pass-inl.h"
#include "kernels/cpu/simd_targets.h"
#include "kernels/cpu/thread_pool.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct Epilogue {
  float hi = 0, lo = 0;  // LayerNorm: the mean as hi + lo, subtracted first; else zero
  float scale = 1;
  const float* weight = nullptr;  // fp32, not padded
  const float* bias = nullptr;    // fp32, not padded
  const void* skip = nullptr;     // NORM_THEN_ADD: alpha * skip (the input's dtype) added last
  float alpha = 1;
  // The next row's input, fetched into the cache while this one is computed and stored
  // (nullptr: none), `prefetch_size` bytes an element.
  const char* prefetch = nullptr;
  int64_t prefetch_size = 0;
};

// The epilogue in fp32, each term present known at compile time:
// ((x - hi) - lo) * scale [rounded to kIn] [* w] [+ b] [+ alpha * skip], skip read in
// kIn. docs/semantics.md allows its rounding (within 2^-20 of the terms' magnitudes) where
// a bias or residual cancels, and the cast_before_weight intermediate's neighbour.
// `stream`: the vector-aligned middle of `out` is written with non-temporal stores. The row
// is read from `src` as kSrc: the fp32 buffer or f32 row (F32), or the f16/bf16 input in
// place (kIn), widened again here rather than stored widened and loaded back.
template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kW, bool kB, bool kS>
void EpilogueStore(const void* src, int64_t n, const Epilogue& e, void* out, bool stream) {
  constexpr DType t = kOut;
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // ((x - hi) - lo) * scale as (x - hi) * scale - lo * scale, one FMA: x - hi is exact
  // near the mean (Sterbenz), and lo * scale (lo within 2^-24 of hi) rounds by a part in
  // 2^48 of hi * scale. Zero for RMSNorm and L2.
  const V vhi = hn::Set(d, e.hi), vs = hn::Set(d, e.scale);
  const V vlos = hn::Set(d, -(e.lo * e.scale));
  const V valpha = hn::Set(d, e.alpha);
  // Locals: stores through `out` could alias `e` as far as the compiler knows.
  const float *weight = e.weight, *bias = e.bias;
  const void* skip = e.skip;
  // always_inline: a call per vector would return it through memory.
  const auto compute = [&](const void* x, const float* w, const float* b, const void* sk) HWY_ATTR
      __attribute__((always_inline)) {
    // Unaligned loads: after a streamed output's unaligned head, or reading the caller's
    // row in place (RowSource), x is not vector-aligned.
    V v = hn::MulAdd(hn::Sub(LoadAs<kSrc>(d, x), vhi), vs, vlos);
    if constexpr (kCast) v = RoundTo(d, kIn, v);
    if constexpr (kW && kB) {
      v = hn::MulAdd(v, hn::LoadU(d, w), hn::LoadU(d, b));  // one rounding where there were two
    } else if constexpr (kW) {
      v = hn::Mul(v, hn::LoadU(d, w));
    } else if constexpr (kB) {
      v = hn::Add(v, hn::LoadU(d, b));
    }
    if constexpr (kS) v = hn::MulAdd(valpha, LoadAs<kIn>(d, sk), v);
    return v;
  };
  const char* prefetch = e.prefetch;
  const int64_t psize = e.prefetch_size;
  const auto at = [&](int64_t i) HWY_ATTR __attribute__((always_inline)) {
    if (prefetch != nullptr) hwy::Prefetch(prefetch + i * psize);
    // No arithmetic on an absent (null) parameter: UB even when never read.
    return compute(Offset(src, kSrc, i), kW ? weight + i : nullptr, kB ? bias + i : nullptr,
                   kS ? Offset(skip, kIn, i) : nullptr);
  };
  const size_t esize = ElementSize(t);
  // A partial vector: the row, parameters and skip from zero-padded copies (the caller's
  // arrays end at n), the result through a stack buffer.
  const auto tail = [&](int64_t i, int64_t count) HWY_ATTR {
    alignas(64) float tw[64] = {}, tb[64] = {};
    alignas(64) unsigned char tx[64 * 4] = {}, ts[64 * 4] = {}, part[64 * 4];
    const size_t floats = static_cast<size_t>(count) * sizeof(float);
    std::memcpy(tx, Offset(src, kSrc, i), static_cast<size_t>(count) * ElementSize(kSrc));
    if constexpr (kW) std::memcpy(tw, weight + i, floats);
    if constexpr (kB) std::memcpy(tb, bias + i, floats);
    if constexpr (kS) {
      std::memcpy(ts, Offset(skip, kIn, i), static_cast<size_t>(count) * ElementSize(kIn));
    }
    StoreAs<t>(d, compute(tx, tw, tb, ts), part);
    std::memcpy(Offset(out, t, i), part, static_cast<size_t>(count) * esize);
  };
  int64_t i = 0;
  const int64_t head = stream ? StreamHead(out, esize, N, n) : -1;
  if (head >= 0) {
    if (head > 0) tail(0, head);
    for (i = head; i + N <= n; i += N) StreamAs<t>(d, at(i), Offset(out, t, i));
  }
  for (; i + N <= n; i += N) StoreAs<t>(d, at(i), Offset(out, t, i));
  if (i < n) tail(i, n - i);
  (void)weight;
  (void)bias;
  (void)skip;
}

using EpilogueStoreFn = void (*)(const void* src, int64_t n, const Epilogue& e, void* out,
                                 bool stream);

// The instantiation for the runtime choices. kIn matters only with a cast or a skip, or
// as the source's dtype; other epilogues share the F32 one whatever the input.
template <DType kOut, DType kIn, DType kSrc, bool kCast, bool kS>
EpilogueStoreFn PickEpilogueStore(bool w, bool b) {
  if (w) {
    return b ? &EpilogueStore<kOut, kIn, kSrc, kCast, true, true, kS>
             : &EpilogueStore<kOut, kIn, kSrc, kCast, true, false, kS>;
  }
  return b ? &EpilogueStore<kOut, kIn, kSrc, kCast, false, true, kS>
           : &EpilogueStore<kOut, kIn, kSrc, kCast, false, false, kS>;
}

template <DType kOut, DType kIn, DType kSrc>
EpilogueStoreFn PickEpilogueStore(bool cast, bool w, bool b, bool s) {
  if constexpr (kIn == DType::kF32) {
    return s ? PickEpilogueStore<kOut, kIn, kSrc, false, true>(w, b)
             : PickEpilogueStore<kOut, kIn, kSrc, false, false>(w, b);
  } else {
    if (cast) {
      return s ? PickEpilogueStore<kOut, kIn, kSrc, true, true>(w, b)
               : PickEpilogueStore<kOut, kIn, kSrc, true, false>(w, b);
    }
    if (s) return PickEpilogueStore<kOut, kIn, kSrc, false, true>(w, b);
    if constexpr (kSrc == DType::kF32) {
      return PickEpilogueStore<kOut, DType::kF32, DType::kF32, false, false>(w, b);
    } else {
      return PickEpilogueStore<kOut, kIn, kSrc, false, false>(w, b);
    }
  }
}

// `src_in`: the row is read as the input's dtype (f16/bf16 in place), else as fp32.
template <DType kOut>
EpilogueStoreFn PickEpilogueStore(DType in, bool src_in, bool cast, bool w, bool b, bool s) {
  switch (in) {
    case DType::kF32:
      return PickEpilogueStore<kOut, DType::kF32, DType::kF32>(false, w, b, s);
    case DType::kF16:
      return src_in ? PickEpilogueStore<kOut, DType::kF16, DType::kF16>(cast, w, b, s)
                    : PickEpilogueStore<kOut, DType::kF16, DType::kF32>(cast, w, b, s);
    case DType::kBF16:
      return src_in ? PickEpilogueStore<kOut, DType::kBF16, DType::kBF16>(cast, w, b, s)
                    : PickEpilogueStore<kOut, DType::kBF16, DType::kF32>(cast, w, b, s);
  }
  return nullptr;
}

EpilogueStoreFn PickEpilogueStore(DType out, DType in, bool src_in, bool cast, bool w, bool b,
                                  bool s) {
  switch (out) {
    case DType::kF32:
      return PickEpilogueStore<DType::kF32>(in, src_in, cast, w, b, s);
    case DType::kF16:
      return PickEpilogueStore<DType::kF16>(in, src_in, cast, w, b, s);
    case DType::kBF16:
      return PickEpilogueStore<DType::kBF16>(in, src_in, cast, w, b, s);
  }
  return nullptr;
}

// ---- the kernel -----------------------------------------------------------------------

// One pass: widen and add the offset (Gemma's 1 + w). No add without an offset: w + 0.0f
// would turn a -0 weight into +0.
template <DType kT, bool kOffset>
void WidenT(const void* src, int64_t n, float offset, float* dst) {
  const D d;
  const V vo = hn::Set(d, offset);
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto widen = [&](const void* p) HWY_ATTR __attribute__((always_inline)) {
    const V v = LoadAs<kT>(d, p);
    return kOffset ? hn::Add(v, vo) : v;
  };
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::Store(widen(Offset(src, kT, i)), d, dst + i);
  if (i < n) {  // dst has room for whole vectors; src ends at n
    alignas(64) unsigned char t[64 * 4] = {};
    std::memcpy(t, Offset(src, kT, i), static_cast<size_t>(n - i) * ElementSize(kT));
    hn::Store(widen(t), d, dst + i);
  }
}

void WidenToF32Impl(DType t, const void* src, int64_t n, float offset, float* dst) {
  const bool o = offset != 0.0f;
  switch (t) {
    case DType::kF32:
      return o ? WidenT<DType::kF32, true>(src, n, offset, dst)
               : WidenT<DType::kF32, false>(src, n, offset, dst);
    case DType::kF16:
      return o ? WidenT<DType::kF16, true>(src, n, offset, dst)
               : WidenT<DType::kF16, false>(src, n, offset, dst);
    case DType::kBF16:
      return o ? WidenT<DType::kBF16, true>(src, n, offset, dst)
               : WidenT<DType::kBF16, false>(src, n, offset, dst);
  }
}

// Where a row's later passes read it. An f32 row without a residual add is read in place
// (LoadRow writes no fp32 copy to store and load back: a 1x4096 call moves a third fewer
// bytes through L1), and so is an f32 h (x + alpha * skip, written by the load pass). A
// large f16/bf16 row without a residual add is too, widened again by the epilogue: that
// saves a store stream where memory is the limit (RMSNorm bf16 at 4096x4096 0.66-0.74 ->
// 0.80-0.84 of memcpy), while in cache the second widening costs more than the buffer
// (L2Norm bf16 at 1x4096 10% slower). Everything else goes through the fp32 buffer.
struct RowSource {
  bool in_place;  // LoadRow writes no buffer
  bool typed;     // the epilogue reads the f16/bf16 input (else fp32)
};
RowSource SourceOf(const RowNormArgs& a, bool h, bool large) {
  const bool add = a.residual == ResidualPlacement::kAddThenNorm;
  const bool f32 = a.x.dtype == DType::kF32;
  const bool typed = !add && !f32 && large;
  return {(!add && f32) || (add && f32 && h) || typed, typed};
}

// The row in fp32 for the statistics' rare second passes (a shift far from the mean,
// squares beyond fp32's range): the fp32 row when there is one, else the input widened
// into `scratch` on first use.
class Fp32Row {
 public:
  Fp32Row(const float* f32, DType t, const void* x, int64_t n, float* scratch)
      : f32_(f32), t_(t), x_(x), n_(n), scratch_(scratch) {}
  const float* get() {
    if (f32_ == nullptr) {
      WidenToF32Impl(t_, x_, n_, 0.0f, scratch_);
      f32_ = scratch_;
    }
    return f32_;
  }

 private:
  const float* f32_;
  DType t_;
  const void* x_;
  int64_t n_;
  float* scratch_;
};

// The sum of squares LoadRow returned, redone in double when fp32 could not hold it.
double CheckedSumOfSquares(double sum, Fp32Row& row, int64_t m) {
  return SquaresLeftF32Range(sum, m) ? SumOfSquaresF64(row.get(), m) : sum;
}

// A row's statistics from LoadRow's sums (and, rarely, the row in fp32): the mean
// (LayerNorm; else 0) and the inverse scale 1/sigma, 1/rms or 1/norm.
void RowStats(const RowNormArgs& a, Fp32Row& row, const RowSums& sums, int64_t stat_cols,
              double* mean, double* scale) {
  const auto inverse = [&](double s) {
    return a.eps_placement == EpsPlacement::kInsideSqrt ? 1.0 / std::sqrt(s + a.eps)
                                                        : 1.0 / (std::sqrt(s) + a.eps);
  };
  *mean = 0;
  switch (a.kind) {
    case RowNormKind::kLayer: {
      double m2;
      if (!OnePassMoments(sums, a.cols, mean, &m2)) {
        const double first = sums.sum + static_cast<double>(a.cols) * sums.shift;
        RowMoments(row.get(), a.cols, first, /*f64=*/false, mean, &m2);
      }
      *scale = inverse(m2 / static_cast<double>(a.cols));
      break;
    }
    case RowNormKind::kRms:
      *scale =
          inverse(CheckedSumOfSquares(sums.sum, row, stat_cols) / static_cast<double>(stat_cols));
      break;
    case RowNormKind::kL2:
      *scale = 1.0 / std::max(std::sqrt(CheckedSumOfSquares(sums.sum, row, a.cols)), a.eps);
      break;
  }
}

// Elements entering a row's statistic (RMSNorm's partial_fraction), and the statistic.
int64_t StatCols(const RowNormArgs& a) {
  return a.kind == RowNormKind::kRms ? PartialCount(a.partial_fraction, a.cols) : a.cols;
}
Stat StatOf(const RowNormArgs& a) {
  return a.kind == RowNormKind::kLayer ? Stat::kMoments : Stat::kSumOfSquares;
}

void RowNormRowsImpl(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end) {
  const int64_t cols = a.cols;
  thread_local AlignedScratch scratch;
  float* row = scratch.Reserve(static_cast<size_t>(cols + kRowPad));
  const bool add_then_norm = a.residual == ResidualPlacement::kAddThenNorm;
  const bool norm_then_add = a.residual == ResidualPlacement::kNormThenAdd;
  const int64_t stat_cols = StatCols(a);
  const DType t = a.x.dtype;
  Epilogue e;
  // cast_before_weight rounds to the input's dtype, a no-op for F32.
  const bool cast = a.kind == RowNormKind::kRms && a.cast_before_weight && t != DType::kF32;
  e.weight = p.weight;
  e.bias = p.bias;
  e.alpha = static_cast<float>(a.alpha);
  e.prefetch_size = ElementSize(t);

  const RowSource source = SourceOf(a, a.h.present(), p.stream);
  const LoadRowFn load = PickLoadRow(t, StatOf(a), add_then_norm, a.h.present(), !source.in_place);
  const EpilogueStoreFn epilogue = PickEpilogueStore(
      a.y.dtype, t, source.typed, cast, p.weight != nullptr, p.bias != nullptr, norm_then_add);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t base = r * cols;
    // Large inputs: the next row is fetched while this one's epilogue runs, so that memory
    // is busy while the core computes (LoadRow then reads it from the cache).
    e.prefetch = p.stream && r + 1 < row_end
                     ? static_cast<const char*>(Offset(a.x.data, t, base + cols))
                     : nullptr;
    const void* x = Offset(a.x.data, t, base);
    void* h = a.h.present() ? Offset(a.h.data, t, base) : nullptr;
    const RowSums sums = load(x, add_then_norm ? Offset(a.skip.data, t, base) : nullptr,
                              static_cast<float>(a.alpha), cols, row, stat_cols, h);
    // The row as the later passes read it, and in fp32 where it is.
    const void* src = !source.in_place ? row : (add_then_norm ? h : x);
    Fp32Row fp32(source.typed ? nullptr : static_cast<const float*>(src), t, x, cols, row);
    double mean, scale;
    RowStats(a, fp32, sums, stat_cols, &mean, &scale);
    e.hi = static_cast<float>(mean);
    e.lo = static_cast<float>(mean - e.hi);
    e.scale = static_cast<float>(scale);
    if (norm_then_add) e.skip = Offset(a.skip.data, t, base);
    void* y = Offset(a.y.data, a.y.dtype, base);
    epilogue(src, cols, e, y, p.stream);
  }
  if (p.stream) hwy::FlushStream();
}

void RowStatisticsImpl(const RowNormArgs& a, int64_t r, double* mean, double* scale) {
  const int64_t cols = a.cols;
  auto row = hwy::AllocateAligned<float>(static_cast<size_t>(cols + kRowPad));
  const bool add_then_norm = a.residual == ResidualPlacement::kAddThenNorm;
  const int64_t stat_cols = StatCols(a);
  const DType t = a.x.dtype;
  // As RowNormRowsImpl reads a large row (its statistics are the same either way; this
  // tests the in-place path's rare second passes), with no h to write.
  const RowSource source = SourceOf(a, /*h=*/false, /*large=*/true);
  const void* x = Offset(a.x.data, t, r * cols);
  const RowSums sums = PickLoadRow(t, StatOf(a), add_then_norm, false, !source.in_place)(
      x, add_then_norm ? Offset(a.skip.data, t, r * cols) : nullptr, static_cast<float>(a.alpha),
      cols, row.get(), stat_cols, nullptr);
  Fp32Row fp32(
      source.typed ? nullptr : (source.in_place ? static_cast<const float*>(x) : row.get()), t, x,
      cols, row.get());
  RowStats(a, fp32, sums, stat_cols, mean, scale);
}

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normd::kernels::cpu {

HWY_EXPORT(RowNormRowsImpl);
HWY_EXPORT(WidenToF32Impl);
HWY_EXPORT(RowStatisticsImpl);

void RowStatistics(const RowNormArgs& a, int64_t row, double* mean, double* scale) {
  ScopedFlushDenormals flush;
  NORMD_DISPATCH(RowStatisticsImpl)(a, row, mean, scale);
}

void WidenToF32(DType t, const void* src, int64_t n, float offset, float* dst) {
  NORMD_DISPATCH(WidenToF32Impl)(t, src, n, offset, dst);
}

void RowNormRows(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end) {
  NORMD_DISPATCH(RowNormRowsImpl)(a, p, row_begin, row_end);
}

}  // namespace normd::kernels::cpu
#endif  // HWY_ONCE
