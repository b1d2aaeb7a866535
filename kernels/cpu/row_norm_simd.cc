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
#include "kernels/cpu/bf16_nan.h"
#include "kernels/cpu/fused_rows-inl.h"
#include "kernels/cpu/narrow_rows-inl.h"
#include "kernels/cpu/paired_epilogue-inl.h"
#include "kernels/cpu/row_epilogue-inl.h"
#include "kernels/cpu/row_epilogue_pick-inl.h"
#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/row_moments-inl.h"
#include "kernels/cpu/row_plan.h"
#include "kernels/cpu/row_stats-inl.h"
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

// alpha in fp32; a NaN given zero low bits where the data are bf16 (bf16_nan.h).
HWY_INLINE float AlphaOf(const RowNormArgs& a) {
  const float alpha = static_cast<float>(a.alpha);
  return a.x.dtype == DType::kBF16 || a.y.dtype == DType::kBF16 ? BF16SafeNaN(alpha) : alpha;
}

// Rows [row_begin, row_end) of `a`, read, grouped and prefetched as row_plan.h's rules say.
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
  e.offset = p.offset;
  e.alpha = AlphaOf(a);
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
  // Parameters in the input's dtype come only with outputs in cache (ParamsInPlace), which
  // take neither the one-loop pass nor the paired epilogue below (both read fp32 copies).
  const EpilogueFns epilogue =
      PickEpilogueStore(a.y.dtype, t, source.typed, cast, p.weight != nullptr, p.bias != nullptr,
                        norm_then_add, source.reform, p.dtype != DType::kF32, p.offset != 0.0f);
  // Row r's input, its h (or null) and the skip its statistics add (or null).
  struct RowAt {
    const void* x;
    void* h;
    const void* skip;
  };
  const auto row_at = [&](int64_t r) HWY_ATTR __attribute__((always_inline)) {
    const int64_t base = r * cols;
    return RowAt{Offset(a.x.data, t, base), a.h.present() ? Offset(a.h.data, t, base) : nullptr,
                 add_then_norm ? Offset(a.skip.data, t, base) : nullptr};
  };
  // Row r's statistics from its sums into `er` (its mean, scale and skip), its fp32 buffer
  // `row`; returns where its epilogue reads it.
  const auto finish = [&](int64_t r, float* row, const RowSums& sums, Epilogue* er) HWY_ATTR
      __attribute__((always_inline)) {
    const auto [x, h, skip] = row_at(r);
    // The row as the later passes read it, and in fp32 where it is.
    const void* src = !source.in_place ? row : (add_then_norm && !source.reform ? h : x);
    Fp32Row fp32(source.typed ? nullptr : static_cast<const float*>(src), t, x, cols, row,
                 source.reform ? skip : nullptr, e.alpha);
    double mean, scale;
    RowStats(a, fp32, sums, stat_cols, &mean, &scale);
    er->hi = static_cast<float>(mean);
    er->lo = static_cast<float>(mean - er->hi);
    er->scale = static_cast<float>(scale);
    if (norm_then_add) er->skip = Offset(a.skip.data, t, r * cols);
    if (source.reform) er->skip = skip;
    return src;
  };
  // Row r's sums (LoadRow), into `row` where it has a buffer.
  const auto sums_of = [&](int64_t r, float* row) HWY_ATTR __attribute__((always_inline)) {
    const auto [x, h, skip] = row_at(r);
    return (h != nullptr && reinterpret_cast<uintptr_t>(h) % h_align == 0
                ? load_streaming_h
                : load)(x, skip, e.alpha, cols, row, stat_cols, h);
  };
  // Row r's sums, then its statistics (finish).
  const auto stats = [&](int64_t r, float* row, Epilogue* er) HWY_ATTR
      __attribute__((always_inline)) {
    return finish(r, row, sums_of(r, row), er);
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
  // Large rows read in place (f32, and f16/bf16 widened again: typed) without a residual
  // or with one added last, Hugging Face's cast and RMSNorm's partial statistics included, from
  // kFusedMinCols columns (OneLoopFits, row_plan.h): row r's epilogue and row r+1's sums (r+2's
  // for short rows, FusedLead) in one loop (fused_rows.cc), the same bits as the two passes, which
  // take the first row's sums, the last row's epilogue, and any row that the loop leaves (a row, or
  // its statistic's part, not a whole number of its blocks, or with a mean of exactly zero). f32
  // rows with a residual added first too (OneLoopAddFits: 1024 to 4096 columns, and long rows),
  // their h formed again from x and the skip in the loop's epilogue, their statistics over the
  // whole row.
  const bool one_loop =
      p.stream && source.in_place && a.y.dtype == t && cols >= kFusedMinCols && row_end - r >= 2 &&
      (add_then_norm ? OneLoopAddFits(t, cols) && stat_cols == cols
                     : OneLoopFits(t, p.weight != nullptr, p.bias != nullptr, norm_then_add, cols));
  const FusedRowPairFn fused =
      one_loop ? PickFusedRowPair(t, StatOf(a), p.weight != nullptr, p.bias != nullptr,
                                  norm_then_add, cast, add_then_norm, a.h.present())
               : nullptr;
  // Large bf16 rows read in place that keep the two passes: their epilogue in paired lanes
  // (paired_epilogue.cc), but for RMSNorm's partial statistics, whose epilogue reads most of
  // the row from memory (no gain in two sets of four rounds: -6% to +8%). The weight and bias
  // in that order where either pass reads rows so.
  const PairedEpilogueFn paired_run =
      p.stream && source.typed && stat_cols == cols
          ? PickPairedEpilogue(t, a.y.dtype, cast, p.weight != nullptr, p.bias != nullptr,
                               norm_then_add, source.reform)
          : nullptr;
  PairedParams paired_params;
  const PairedParams* const paired =
      fused != nullptr || paired_run != nullptr
          ? PairParams(t, static_cast<const float*>(p.weight), static_cast<const float*>(p.bias),
                       cols, &paired_params)
          : nullptr;
  // Elements [begin, end) of row `src`'s epilogue `er` (read in place) into row y, from
  // EpilogueStore.
  const auto part = [&](const void* src, const Epilogue& er, int64_t begin, int64_t end, void* y) {
    if (begin >= end) return;
    Epilogue at = er;
    at.prefetch = nullptr;
    at.prefetch_skip = nullptr;
    if (at.weight != nullptr) at.weight = Offset(at.weight, p.dtype, begin);
    if (at.bias != nullptr) at.bias = Offset(at.bias, p.dtype, begin);
    if (at.skip != nullptr) at.skip = Offset(at.skip, t, begin);
    epilogue.one(Offset(src, t, begin), end - begin, at, Offset(y, t, begin), true);
  };
  // Row src's epilogue into y: in paired lanes as far as they go, the rest from EpilogueStore.
  const auto epilogue_one = [&](const void* src, const Epilogue& er, void* y) {
    const int64_t done =
        paired_run != nullptr && paired != nullptr ? paired_run(src, cols, er, *paired, y) : 0;
    if (done > 0) return part(src, er, done, cols, y);
    epilogue.one(src, cols, er, y, p.stream);
  };
  if (fused != nullptr) {
    // Rows whose sums the loop has taken and whose epilogues are still to come, in order:
    // FusedLead of them (row_plan.h). Their sources are in place (the loop's condition), so
    // rows2 serves each finish only while it runs (Fp32Row's rare widening).
    const int64_t lead =
        std::min<int64_t>(FusedLead(cols * static_cast<int64_t>(ElementSize(t))), row_end - r - 1);
    Epilogue pend[2];
    const void* psrc[2];
    for (int64_t k = 0; k < lead; ++k) {
      pend[k] = e;
      psrc[k] = stats(r + k, rows2, &pend[k]);
    }
    for (; r + lead < row_end; ++r) {
      Epilogue& cur = pend[0];
      const void* const src = psrc[0];
      const RowAt here = row_at(r), sums_row = row_at(r + lead);
      void* y = Offset(a.y.data, t, r * cols);
      RowSums sums;
      // A residual added first: the loop forms h again from x and the skip (src is h for f32).
      const FusedAdd add =
          add_then_norm ? FusedAdd{here.skip, sums_row.skip, sums_row.h} : FusedAdd{};
      const FusedSpan span = fused(add_then_norm ? here.x : src, sums_row.x, cols, stat_cols, cur,
                                   paired, y, &sums, add);
      if (span.begin >= 0) {
        part(src, cur, 0, span.begin, y);
        part(src, cur, span.end, cols, y);
      } else {  // the two passes, this row's epilogue fetching the row the sums read next
        cur.prefetch = static_cast<const char*>(sums_row.x);
        if (norm_then_add || source.reform) {
          cur.prefetch_skip = static_cast<const char*>(Offset(a.skip.data, t, (r + lead) * cols));
        }
        epilogue_one(src, cur, y);
        sums = sums_of(r + lead, rows2);
      }
      if (lead == 2) {  // row r is done: row r+1 moves up, row r+2 takes its place
        pend[0] = pend[1];
        psrc[0] = psrc[1];
      }
      pend[lead - 1] = e;
      psrc[lead - 1] = finish(r + lead, rows2, sums, &pend[lead - 1]);
    }
    for (int64_t k = 0; k < lead; ++k) {
      epilogue_one(psrc[k], pend[k], Offset(a.y.data, t, (r + k) * cols));
    }
    r += lead;
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
      epilogue_one(src[k], eg[k], Offset(a.y.data, a.y.dtype, (r + k) * cols));
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
    epilogue_one(stats(r, rows2, &e), e, Offset(a.y.data, a.y.dtype, r * cols));
  }
  if (p.stream) hwy::FlushStream();
}

void RowNormRowsImpl(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::kF32 && NarrowEligible(a, StatCols(a))) {
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
  const float alpha = AlphaOf(a);
  const RowSums sums = PickLoadRow(t, StatOf(a), add_then_norm, false, !source.in_place)(
      x, skip, alpha, cols, row.get(), stat_cols, nullptr);
  Fp32Row fp32(
      source.typed ? nullptr : (source.in_place ? static_cast<const float*>(x) : row.get()), t, x,
      cols, row.get(), source.reform ? skip : nullptr, alpha);
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
