// Highway implementation of RowNormRows. Per row: one pass loads and widens the input,
// fusing h = alpha * skip + x (and storing h), into an fp32 row buffer that stays in L1/L2
// where the row has a residual add (else the later passes read the input in place and
// widen it again, and an f32 h in place: RowSource), and sums the row's squares, or
// (LayerNorm) its deviations from a shift and their squares, which give the moments unless
// the shift was far from the mean (then a centred pass over the row corrects the mean:
// OnePassMoments); one pass computes the epilogue (row_epilogue-inl.h; rows in cache with
// a weight and a bias two at a time), converts and stores y (non-temporal when large). The
// input is read from memory once.
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
#include "kernels/cpu/cache_size.h"
#include "kernels/cpu/fused_rows-inl.h"
#include "kernels/cpu/narrow_rows-inl.h"
#include "kernels/cpu/row_epilogue-inl.h"
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
// (L2Norm bf16 at 1x4096 10% slower). So is a large f16/bf16 row with a residual added,
// from kReformCols columns: the epilogue forms h = x + alpha * skip again from x and skip,
// which LoadRow has just brought into the cache, rather than reading a 16 KiB fp32 buffer
// (at 4096 columns) that crowds them out of L1. One thread, four alternating rounds
// (BENCHMARKS.md, issue 16, twenty-second session): fused add+RMSNorm f16/bf16 4096x4096
// 37-38 -> 42-43 GB/s and 1024x65536 31-33 -> 43; fused add+LayerNorm f16 4096x4096
// 26.4 -> 30.7 and 1024x65536 26 -> 37, bf16 1024x65536 28 -> 31, bf16 4096x4096 unchanged.
// At 1024 columns, where the buffer stays in L1, the second widening cost bf16 27-43%
// (twenty-first session). Everything else goes through the fp32 buffer.
constexpr int64_t kReformCols = 4096;
struct RowSource {
  bool in_place;  // LoadRow writes no buffer
  bool typed;     // the epilogue reads the f16/bf16 input (else fp32)
  bool reform;    // ... and the skip, forming h = x + alpha * skip again
};
RowSource SourceOf(const RowNormArgs& a, bool h, bool large) {
  const bool add = a.residual == ResidualPlacement::kAddThenNorm;
  const bool f32 = a.x.dtype == DType::kF32;
  const bool cast = a.kind == RowNormKind::kRms && a.cast_before_weight;
  const bool reform = add && !f32 && large && !cast && a.cols >= kReformCols;
  const bool typed = (!add && !f32 && large) || reform;
  return {(!add && f32) || (add && f32 && h) || typed, typed, reform};
}

// The row in fp32 for the statistics' rare second passes (a shift far from the mean,
// squares beyond fp32's range): the fp32 row when there is one, else the input (plus
// alpha * skip where the epilogue forms h again) widened into `scratch` on first use.
class Fp32Row {
 public:
  Fp32Row(const float* f32, DType t, const void* x, int64_t n, float* scratch,
          const void* skip = nullptr, float alpha = 0)
      : f32_(f32), t_(t), x_(x), n_(n), scratch_(scratch), skip_(skip), alpha_(alpha) {}
  const float* get() {
    if (f32_ == nullptr) {
      if (skip_ != nullptr) {
        PickLoadRow(t_, Stat::kNone, /*skip=*/true, /*h=*/false)(x_, skip_, alpha_, n_, scratch_, 0,
                                                                 nullptr);
      } else {
        WidenToF32Impl(t_, x_, n_, 0.0f, scratch_);
      }
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
  const void* skip_;
  float alpha_;
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

// f16/bf16 rows of at most kShortRowCols columns take their statistics kShortGroup at a
// time. Measured at 128 columns (QK-norm, alternating runs): groups of 4 sped f16/bf16 up
// 10-13%, groups of 2 by 2%, groups of 8 slowed them 25%; f32, already at 0.9 of memcpy
// there, ran 0-10% slower in groups of 4.
// Large f16/bf16 rows without a residual, up to kGroupedStreamCols columns, go in groups
// too, which also fetches four rows ahead instead of one. Alternating rounds at 4096x4096
// and 16384x1024, one thread, medians (BENCHMARKS.md, issue 16, twentieth session): RMSNorm,
// Gemma's, Hugging Face's and L2 +2-25% (L2 f16 at 1024 columns -4%), LayerNorm +15-22% at
// 1024 columns and unchanged at 4096; two threads, bound by memory, within 0.92-1.16. The
// residual forms ran 8-44% slower in groups, RMSNorm with partial statistics in bf16
// 11-17%, and in cache (8x4096, 64x4096) groups of 4096 columns cost RMSNorm and L2 5-15%.
constexpr int64_t kShortRowCols = 512;
constexpr int kShortGroup = 4;
constexpr int64_t kGroupedStreamCols = 4096;

// How much of the next row a large row's epilogue prefetches: its first kPrefetchBytes, so
// that the next statistics pass does not begin on a miss; the hardware prefetchers keep
// ahead from there (all of it where it fits in L2: WholeNextRowFits, below). All of a long
// row did not fit on a 1 MiB L2: at 65536 f32 columns the row, the next row and the weight
// and bias are 1 MiB, the Zen 4's whole L2. Measured at 1024x65536 (one
// thread, alternating runs; BENCHMARKS.md, issue 16, nineteenth session): capped, LayerNorm
// f32 0.65-0.71 -> 0.85-0.87 of memcpy, f16/bf16 0.50-0.54 -> 0.79-0.85, RMSNorm 0.72-0.80
// -> 0.90-0.95. Two kinds of row ran faster with all of it, and keep it: RMSNorm's partial
// statistics (the rest of the row comes from memory in the epilogue otherwise: f16/bf16
// 0.83-0.89 -> 0.54 capped) and Hugging Face's cast before the weight in f16/bf16 (an
// epilogue with more arithmetic: 1.01-1.07 -> 0.75-0.79 capped). 8, 16 and 32 KiB measured
// the same; rows up to 16 KiB (4096 f32 columns) are prefetched whole as before.
// LayerNorm then add reads its residual only in the epilogue: the next row's residual is
// prefetched whole beside the input (it was not before). One thread, f16/bf16, two A/B
// runs: 4096x4096 0.36-0.51 -> 0.59-0.80 of memcpy, 1024x65536 0.46-0.55 -> 0.60-0.78,
// 16384x1024 unchanged within its spread (0.55-0.81 -> 0.51-0.85). The fused adds, whose
// statistics read the residual, ran 0-10% slower with its next row prefetched too (capped
// as the input's) while they kept an fp32 row buffer; without it (h formed again, from
// kReformCols columns) they prefetch it, capped: one thread, three alternating rounds
// (twenty-second session), 4096x4096 fused add+RMSNorm f16/bf16 40-41 -> 55-56 GB/s,
// fused add+LayerNorm f16 29.5 -> 39, bf16 25.6 -> 39; 1024x65536 unchanged (all of the
// row instead: 7-9% slower there, but for LayerNorm bf16).
constexpr int64_t kPrefetchBytes = 16 << 10;

// Whether all of the next row fits beside what a row's epilogue reads: the row (in place or
// its fp32 buffer), the fp32 weight and bias, a skip it adds, and the next row's input and
// skip, together less than half of L2. Then the epilogue prefetches all of the next row,
// so that memory keeps reading while the epilogue works from L2. On a 2 MiB L2 (an Intel
// Xeon VM; BENCHMARKS.md, issue 16, twenty-eighth session), 1024x65536, one thread, two
// alternating rounds, ratio to a streamed memcpy: RMSNorm f32 0.63-0.64 -> 0.71-0.73, L2
// f32 0.66 -> 0.73, f16/bf16 0.60-0.65 -> 0.71-0.72, LayerNorm f16 0.50-0.52 -> 0.57-0.58;
// the other rows within the rounds' spread. LayerNorm f32 (1 MiB) and the fused adds stay
// capped (all of the row cost fused add+LayerNorm f32 0.63-0.65 -> 0.50-0.51 in a build
// with the cap as a switch). On a 1 MiB L2 (the Zen 4 of earlier sessions) the rule keeps
// capped every row that the nineteenth session measured faster capped but L2-norm f16/bf16
// (256 KiB with the next row): 0.95-0.97 capped there, 0.88-0.90 whole.
bool WholeNextRowFits(const RowNormArgs& a, const RowSource& source, const RowParams& p) {
  const int64_t in = a.cols * static_cast<int64_t>(ElementSize(a.x.dtype));
  const int64_t f32 = a.cols * static_cast<int64_t>(sizeof(float));
  const bool skip = a.residual == ResidualPlacement::kNormThenAdd || source.reform;
  const int64_t bytes = (source.in_place ? in : f32) + (p.weight != nullptr ? f32 : 0) +
                        (p.bias != nullptr ? f32 : 0) + (skip ? 2 * in : 0) + in;
  return 2 * bytes < L2CacheBytes();
}

// Where rows are short the next row is too near: a row of 1024 f32 columns (4 KiB) is
// read in about 100 ns, a memory latency. Such rows fetch the row 16 KiB ahead. One
// thread, five alternating rounds at 16384x1024 (BENCHMARKS.md, issue 16, twenty-second
// session), GB/s medians: LayerNorm, RMSNorm, Gemma's, L2 f32 43-47 -> 50-54.5, LayerNorm
// then add f32 39.6 -> 46.1, f16 32.0 -> 36.5, bf16 25.6 -> 27.5; RMSNorm's partial
// statistics and Hugging Face's cast in f16/bf16 unchanged. Rows of 8 KiB (LayerNorm then
// add f16/bf16 at 4096 columns, two rows ahead) ran 0-9% slower, and the fused adds'
// (buffered) 1024-column rows 25% slower: they fetch the next row.
constexpr int64_t kPrefetchAheadBytes = 16 << 10;

// The columns of the large f16/bf16 rows without a residual (nor partial statistics, nor
// Hugging Face's cast) that take one loop for a row's epilogue and the next row's sums
// (fused_rows.cc) rather than the two passes a row: there memory reads and writes at once,
// as in a copy, where the passes took turns. One thread / two, ratio to a streamed memcpy,
// three alternating rounds (BENCHMARKS.md, issue 16, thirty-first session, an Intel VM):
// at 4096x4096 LayerNorm f16/bf16 0.55-0.64 -> 0.71-0.81 / 0.62-0.68 -> 0.73-0.85,
// RMSNorm, Gemma's and L2 0.68-0.82 -> 0.72-0.88 / 0.69-0.82 -> 0.78-0.91; at 16384x1024
// 0.59-0.75 -> 0.66-0.86 / 0.63-0.78 -> 0.71-0.90. At 1024x65536 (rows of 128 KiB) it lost
// (LayerNorm f16 0.41-0.50 -> 0.38-0.43, L2 bf16 0.74-0.85 -> 0.51-0.62), and rows between
// 4096 and 65536 columns were not measured: they keep the two passes. Fetching a later row
// in the loop as well moved the rows both ways.
constexpr int64_t kFusedMinCols = 1024;
constexpr int64_t kFusedMaxCols = 4096;

void GeneralRows(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end) {
  const int64_t cols = a.cols;
  thread_local AlignedScratch scratch;
  // Short rows take their statistics kShortGroup at a time (below); rows in cache with a
  // weight and a bias go in pairs. A row buffer for each, each starting vector-aligned.
  const int64_t stride = (cols + kRowPad + 15) / 16 * 16;
  const int64_t stat_cols = StatCols(a);
  const bool short_rows =
      a.x.dtype != DType::kF32 &&
      (cols <= kShortRowCols || (p.stream && a.residual == ResidualPlacement::kNone &&
                                 stat_cols == cols && cols <= kGroupedStreamCols));
  float* const rows2 =
      scratch.Reserve(static_cast<size_t>((short_rows ? kShortGroup : 2) * stride));
  const bool add_then_norm = a.residual == ResidualPlacement::kAddThenNorm;
  const bool norm_then_add = a.residual == ResidualPlacement::kNormThenAdd;
  const DType t = a.x.dtype;
  Epilogue e;
  // cast_before_weight rounds to the input's dtype, a no-op for F32.
  const bool cast = a.kind == RowNormKind::kRms && a.cast_before_weight && t != DType::kF32;
  e.weight = p.weight;
  e.bias = p.bias;
  e.alpha = static_cast<float>(a.alpha);
  e.prefetch_size = ElementSize(t);

  const RowSource source = SourceOf(a, a.h.present(), p.stream);
  e.prefetch_count = stat_cols < cols || cast || WholeNextRowFits(a, source, p)
                         ? cols
                         : std::min(cols, kPrefetchBytes / e.prefetch_size);
  // Backwards: a row in cache whose epilogue reads what its statistics pass has just written
  // (the fp32 buffer, or an f32 h) is finished from its end back, where those lines are still
  // in L1. At 4096 columns the row, that copy, the weight and the bias outgrow a 32 KiB L1
  // (Zen 4), and going forwards the epilogue found the copy's start gone to L2. Rows read in
  // place stay forwards: backwards, f32 rows without a residual ran 0-7% slower (why, the
  // profile did not show). One thread, five alternating rounds (BENCHMARKS.md, issue 16,
  // twenty-sixth session), 1x4096, median ns per call: fused add+RMSNorm f32 982 -> 873,
  // f16/bf16 909 -> 856-861; fused add+LayerNorm f32 1112 -> 1055, f16/bf16 1122 -> 1088.
  e.backwards = !p.stream && (!source.in_place || add_then_norm);
  const LoadRowFn load = PickLoadRow(t, StatOf(a), add_then_norm, a.h.present(), !source.in_place);
  // A large f16/bf16 h goes out with non-temporal stores where its row is vector-aligned,
  // as y does: a plain store first reads the line it fills (with x and skip read and y
  // written, a quarter more traffic) and keeps it in L1 beside the row buffer, the weight
  // and the bias. One thread, three alternating runs (BENCHMARKS.md, issue 16,
  // twenty-first session): fused add+RMSNorm f16/bf16 4096x4096 28-32 -> 35-37.5 GB/s,
  // 1024x65536 26-29 -> 30-32, 16384x1024 +2-17%; fused add+LayerNorm 4096x4096 and
  // 1024x65536 +2-15%, 16384x1024 unchanged.
  const LoadRowFn load_streaming_h =
      p.stream ? PickLoadRow(t, StatOf(a), add_then_norm, a.h.present(), !source.in_place, true)
               : load;
  const size_t h_align = hn::Lanes(D()) * ElementSize(t);
  const EpilogueFns epilogue =
      PickEpilogueStore(a.y.dtype, t, source.typed, cast, p.weight != nullptr, p.bias != nullptr,
                        norm_then_add, source.reform);
  // Row r's statistics from its sums into `er` (its mean, scale and skip), its fp32 buffer
  // `row`; returns where its epilogue reads it.
  const auto finish = [&](int64_t r, float* row, const RowSums& sums, Epilogue* er) HWY_ATTR
      __attribute__((always_inline)) {
    const int64_t base = r * cols;
    const void* x = Offset(a.x.data, t, base);
    void* h = a.h.present() ? Offset(a.h.data, t, base) : nullptr;
    const void* skip = add_then_norm ? Offset(a.skip.data, t, base) : nullptr;
    // The row as the later passes read it, and in fp32 where it is.
    const void* src = !source.in_place ? row : (add_then_norm && !source.reform ? h : x);
    Fp32Row fp32(source.typed ? nullptr : static_cast<const float*>(src), t, x, cols, row,
                 source.reform ? skip : nullptr, static_cast<float>(a.alpha));
    double mean, scale;
    RowStats(a, fp32, sums, stat_cols, &mean, &scale);
    er->hi = static_cast<float>(mean);
    er->lo = static_cast<float>(mean - er->hi);
    er->scale = static_cast<float>(scale);
    if (norm_then_add) er->skip = Offset(a.skip.data, t, base);
    if (source.reform) er->skip = skip;
    return src;
  };
  // Row r's sums (LoadRow), then its statistics (finish).
  const auto stats = [&](int64_t r, float* row, Epilogue* er) HWY_ATTR
      __attribute__((always_inline)) {
    const int64_t base = r * cols;
    const void* x = Offset(a.x.data, t, base);
    void* h = a.h.present() ? Offset(a.h.data, t, base) : nullptr;
    const void* skip = add_then_norm ? Offset(a.skip.data, t, base) : nullptr;
    const RowSums sums =
        (h != nullptr && reinterpret_cast<uintptr_t>(h) % h_align == 0 ? load_streaming_h : load)(
            x, skip, static_cast<float>(a.alpha), cols, row, stat_cols, h);
    return finish(r, row, sums, er);
  };
  // Rows in cache with a weight and a bias go in pairs, sharing each parameter vector's
  // load (EpilogueStore2); the rest one by one, large rows each prefetching the next.
  // Measured (BENCHMARKS.md, issue 16, seventeenth session): pairs sped LayerNorm up 5-20%
  // at 8x4096 and 64x4096, but slowed RMSNorm (a weight only) 3-11% and f32 LayerNorm then
  // add (x, skip and y of two rows beside w and b) 8%.
  const bool pairs =
      !p.stream && p.weight != nullptr && p.bias != nullptr && !(norm_then_add && t == DType::kF32);
  int64_t r = row_begin;
  for (; pairs && r + 2 <= row_end; r += 2) {
    Epilogue e1 = e;
    const void* src0 = stats(r, rows2, &e);
    const void* src1 = stats(r + 1, rows2 + stride, &e1);
    epilogue.two(src0, src1, cols, e, e1, Offset(a.y.data, a.y.dtype, r * cols),
                 Offset(a.y.data, a.y.dtype, (r + 1) * cols));
  }
  // Large f16/bf16 rows without a residual, kFusedMinCols to kFusedMaxCols columns: row r's
  // epilogue and row r+1's sums in one loop (fused_rows.cc), the same bits as the two
  // passes, which take the first row's sums, the last row's epilogue, and any row that the
  // loop leaves (a row not a whole number of its blocks, or with a mean of exactly zero).
  const FusedRowPairFn fused =
      p.stream && a.residual == ResidualPlacement::kNone && !cast && stat_cols == cols &&
              source.typed && a.y.dtype == t && cols >= kFusedMinCols && cols <= kFusedMaxCols &&
              row_end - r >= 2
          ? PickFusedRowPair(t, StatOf(a), p.weight != nullptr, p.bias != nullptr)
          : nullptr;
  if (fused != nullptr) {
    // Elements [begin, end) of row `src`'s epilogue `er` into row y, from EpilogueStore.
    const auto part = [&](const void* src, const Epilogue& er, int64_t begin, int64_t end,
                          void* y) {
      if (begin >= end) return;
      Epilogue at = er;
      at.prefetch = nullptr;
      if (at.weight != nullptr) at.weight += begin;
      if (at.bias != nullptr) at.bias += begin;
      epilogue.one(Offset(src, t, begin), end - begin, at, Offset(y, t, begin), true);
    };
    Epilogue cur = e;
    const void* src = stats(r, rows2, &cur);
    for (; r + 1 < row_end; ++r) {
      const void* next = Offset(a.x.data, t, (r + 1) * cols);
      void* y = Offset(a.y.data, t, r * cols);
      RowSums sums;
      const FusedSpan span = fused(src, next, cols, cur, y, &sums);
      if (span.begin >= 0) {
        part(src, cur, 0, span.begin, y);
        part(src, cur, span.end, cols, y);
      } else {  // the two passes, this row's epilogue fetching the next row
        cur.prefetch = static_cast<const char*>(next);
        epilogue.one(src, cols, cur, y, true);
        sums = load(next, nullptr, 1.0f, cols, rows2, stat_cols, nullptr);
      }
      Epilogue following = e;
      src = finish(r + 1, rows2, sums, &following);
      cur = following;
    }
    epilogue.one(src, cols, cur, Offset(a.y.data, t, r * cols), true);
    ++r;
  }
  // Short rows: the statistics of kShortGroup rows, then their epilogues. A row's
  // statistics end in a chain of long latencies (the lanes' sum, a square root and a
  // division: about 50 cycles) that the epilogue waits for; row by row, the next row's
  // chain began only after this row's epilogue, and at 128 columns the chains were most
  // of the time (QK-norm bf16 4096x32x128, BENCHMARKS.md, issue 16, eighteenth session).
  for (; short_rows && !pairs && r + kShortGroup <= row_end; r += kShortGroup) {
    Epilogue eg[kShortGroup];
    const void* src[kShortGroup];
    for (int k = 0; k < kShortGroup; ++k) {
      eg[k] = e;
      src[k] = stats(r + k, rows2 + k * stride, &eg[k]);
    }
    for (int k = 0; k < kShortGroup; ++k) {
      eg[k].prefetch =
          p.stream && r + k + kShortGroup < row_end
              ? static_cast<const char*>(Offset(a.x.data, t, (r + k + kShortGroup) * cols))
              : nullptr;
      epilogue.one(src[k], cols, eg[k], Offset(a.y.data, a.y.dtype, (r + k) * cols), p.stream);
    }
  }
  // Rows of at most kPrefetchAheadBytes / 4 fetch the row kPrefetchAheadBytes ahead rather
  // than the next, but for the fused adds (below).
  const int64_t row_bytes = cols * static_cast<int64_t>(ElementSize(t));
  const int64_t ahead = !add_then_norm && row_bytes <= kPrefetchAheadBytes / 4
                            ? (kPrefetchAheadBytes + row_bytes - 1) / row_bytes
                            : 1;
  for (; r < row_end; ++r) {
    // Large inputs: a later row is fetched while this one's epilogue runs, so that memory
    // is busy while the core computes (LoadRow then reads it from the cache).
    e.prefetch = p.stream && r + ahead < row_end
                     ? static_cast<const char*>(Offset(a.x.data, t, (r + ahead) * cols))
                     : nullptr;
    e.prefetch_skip = e.prefetch != nullptr && (norm_then_add || source.reform)
                          ? static_cast<const char*>(Offset(a.skip.data, t, (r + ahead) * cols))
                          : nullptr;
    const void* src = stats(r, rows2, &e);
    epilogue.one(src, cols, e, Offset(a.y.data, a.y.dtype, r * cols), p.stream);
  }
  if (p.stream) hwy::FlushStream();
}

void RowNormRowsImpl(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end) {
  if (NarrowEligible(a, StatCols(a))) {
    return PickNarrowRows(a, p)(a, p, row_begin, row_end, GeneralRows);
  }
  GeneralRows(a, p, row_begin, row_end);
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
  const void* skip = add_then_norm ? Offset(a.skip.data, t, r * cols) : nullptr;
  const RowSums sums = PickLoadRow(t, StatOf(a), add_then_norm, false, !source.in_place)(
      x, skip, static_cast<float>(a.alpha), cols, row.get(), stat_cols, nullptr);
  Fp32Row fp32(
      source.typed ? nullptr : (source.in_place ? static_cast<const float*>(x) : row.get()), t, x,
      cols, row.get(), source.reform ? skip : nullptr, static_cast<float>(a.alpha));
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
