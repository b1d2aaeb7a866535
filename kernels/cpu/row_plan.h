// How the row kernel (row_norm_simd.cc) reads and groups rows, by op, dtype and size:
// where a row's later passes read it (RowSource), which rows go in groups or through the
// one-loop pass, and how much of a later row a row's epilogue fetches. Each rule says what
// it was measured against (BENCHMARKS.md, issue 16). Plain functions of the arguments and
// the L2's size, the same on every SIMD target. Stateless; safe from any thread.
#ifndef NORMD_KERNELS_CPU_ROW_PLAN_H_
#define NORMD_KERNELS_CPU_ROW_PLAN_H_

#include <cmath>
#include <cstdint>

#include "kernels/cpu/cache_size.h"
#include "kernels/cpu/row_norm_simd.h"
#include "normd/kernels/dtype.h"
#include "normd/kernels/ops.h"

namespace normd::kernels::cpu {

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
// (twenty-first session). So is a LayerNorm f16/bf16 row in cache without a residual, from
// kReformCols columns (InPlaceLayerRow): its fp32 weight and bias beside the row's fp32 copy
// outgrow L1 and the epilogue read all of them from L2; read in place, the epilogue reads
// the 8 KiB row again instead of a 16 KiB copy the statistics pass stored. One thread, alternating
// rounds of a switch (BENCHMARKS.md, issue 16, sixty-second session), median ratio to the
// in-cache memcpy, two sets of four rounds: f16 8x4096 0.20 -> 0.23 (both sets), 64x4096
// 0.20-0.21 -> 0.22-0.23; bf16 8x4096 0.22 -> 0.24-0.26, 64x4096 0.23 -> 0.24-0.25; 1x4096
// f16 1131-1200 -> 1082-1168 ns, bf16 1250-1256 -> 1154-1204. RMSNorm and L2 (a weight or
// nothing beside the row) lost with it (fifty-eighth session), and LayerNorm then add (a skip
// read beside it) did not gain (four rounds: 1x4096 bf16 1145 -> 1452 ns, f16 1414 -> 1400,
// 8x4096 and 64x4096 within 0.03).
// Everything else goes through the fp32 buffer.
constexpr int64_t kReformCols = 4096;
inline bool InPlaceLayerRow(const RowNormArgs& a) {
  return a.kind == RowNormKind::kLayer && a.residual == ResidualPlacement::kNone &&
         a.x.dtype != DType::kF32 && a.cols >= kReformCols;
}
struct RowSource {
  bool in_place;  // LoadRow writes no buffer
  bool typed;     // the epilogue reads the f16/bf16 input (else fp32)
  bool reform;    // ... and the skip, forming h = x + alpha * skip again
};
inline RowSource SourceOf(const RowNormArgs& a, bool h, bool large) {
  const bool add = a.residual == ResidualPlacement::kAddThenNorm;
  const bool f32 = a.x.dtype == DType::kF32;
  const bool cast = a.kind == RowNormKind::kRms && a.cast_before_weight;
  const bool reform = add && !f32 && large && !cast && a.cols >= kReformCols;
  const bool typed = (!add && !f32 && large) || reform || InPlaceLayerRow(a);
  return {(!add && f32) || (add && f32 && h) || typed, typed, reform};
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

// Whether the epilogue reads an f16/bf16 weight and bias in place, widening each vector in
// registers, rather than fp32 copies widened once a call (RowParams): for outputs in cache
// (not streamed) in the input's dtype, rows longer than kShortRowCols (Gemma's 1 + w formed
// there too, in fp32, for a weight without a bias; not a NaN offset, whose copies for a
// bf16 output are made NaN-safe, bf16_nan.h). The copies cost a 1x4096 call as much as its own
// arithmetic (their stores, and 16-32 KiB of fp32 beside the row in a 48 KiB L1). With a
// bias or a residual, whose rows fill L1 beside fp32 parameters, in place gains at any
// count of rows; a weight alone (RMSNorm, Hugging Face's, partial) only below
// kParamsInPlaceRows rows, where the widening is not yet paid back: there the copy is read
// from L1 by every row, and the widening in registers repeats per row. One thread on the
// Intel VM, f16/bf16 with parameters in their dtype (BENCHMARKS.md, issue 16, fifty-sixth
// session), ns per 1x4096 call: LayerNorm 1426-1466 -> 742-774, fused add+LayerNorm
// 1644-1770 -> 954-964, RMSNorm 672-762 -> 535-551, Gemma's 675-698 -> 520-550; at 8x4096
// and 64x4096, LayerNorm, the fused adds and LayerNorm then add f16 +11-33%, bf16 -11% to
// +13%; RMSNorm alone -3% to -10% (so in place only below 4 rows). Large outputs keep the
// copies, read once a call by thousands of rows (and by the one-loop pass and the paired
// epilogue, which take fp32).
constexpr int64_t kParamsInPlaceRows = 4;
inline bool ParamsInPlace(const RowNormArgs& a, float offset, bool stream) {
  const DType t = a.x.dtype;
  const bool w = a.weight.present(), b = a.bias.present();
  return t != DType::kF32 && a.y.dtype == t && !stream && a.cols > kShortRowCols &&
         !std::isnan(offset) && (offset == 0.0f || (w && !b)) && (w || b) &&
         (!w || a.weight.dtype == t) && (!b || a.bias.dtype == t) &&
         (b || a.residual != ResidualPlacement::kNone || a.rows < kParamsInPlaceRows);
}

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
inline bool WholeNextRowFits(const RowNormArgs& a, const RowSource& source, const RowParams& p) {
  const int64_t in = a.cols * static_cast<int64_t>(ElementSize(a.x.dtype));
  const int64_t f32 = a.cols * static_cast<int64_t>(sizeof(float));
  const int64_t param = a.cols * static_cast<int64_t>(ElementSize(p.dtype));
  const bool skip = a.residual == ResidualPlacement::kNormThenAdd || source.reform;
  const int64_t bytes = (source.in_place ? in : f32) + (p.weight != nullptr ? param : 0) +
                        (p.bias != nullptr ? param : 0) + (skip ? 2 * in : 0) + in;
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

// The columns of the large rows read in place without a residual (f32 and f16/bf16; with Hugging
// Face's cast since the forty-third session, RMSNorm's partial statistics since the sixty-first:
// the next row's sums over its first part, in whole blocks, the loop fetching on over the rest;
// one thread / two, four alternating rounds on the Intel VM, medians of the ratio to memcpy, f16
// 4096x4096 0.62 / 0.65 -> 0.93 / 0.88, 16384x1024 0.64 / 0.60 -> 0.81 / 0.80, bf16 0.60 / 0.56
// -> 0.90 / 0.81, 0.65 / 0.62 -> 0.76 / 0.71, f32 0.82 / 0.74 -> 0.97 / 0.89, 1024x65536 f32 0.70
// / 0.74 -> 0.85 / 0.89, bf16 0.60 / 0.59 -> 0.67 / 0.65; BENCHMARKS.md) that take one loop
// for a row's epilogue and the next row's sums (fused_rows.cc) rather than the two passes a row:
// there memory reads and writes at once, as in a copy, where the passes took turns. One thread /
// two, ratio to a streamed memcpy, three alternating rounds (BENCHMARKS.md, issue 16, thirty-first
// session, an Intel VM): at 4096x4096 LayerNorm f16/bf16 0.55-0.64 -> 0.71-0.81 / 0.62-0.68 ->
// 0.73-0.85, RMSNorm, Gemma's and L2 0.68-0.82 -> 0.72-0.88 / 0.69-0.82 -> 0.78-0.91; at 16384x1024
// 0.59-0.75 -> 0.66-0.86 / 0.63-0.78 -> 0.71-0.90. At 1024x65536 (rows of 128 KiB) it lost
// (LayerNorm f16 0.41-0.50 -> 0.38-0.43, L2 bf16 0.74-0.85 -> 0.51-0.62); since the statistics
// pass fetched long rows ahead (kFusedLongRowBytes, below) it gains there in every dtype. Rows
// between 4096 columns and kFusedLongRowBytes were not measured: they keep the two passes. Fetching
// a later row in the loop as well moved the rows both ways. f32 rows took the loop later (a Zen 5
// VM, BENCHMARKS.md, issue 16, forty-second session; two sets of five and four alternating rounds,
// the sets' medians, one thread / two): at 16384x1024 LayerNorm 0.70, 0.93 -> 1.03, 1.01 / 0.75,
// 0.89 -> 1.05, 1.04, L2 one thread 0.77, 0.83 -> 0.89, 0.99, Gemma's RMSNorm (first set) 0.67 ->
// 0.84 / 0.79 -> 0.96; at 4096x4096, where a LayerNorm row with its weight and bias outgrows L1,
// from -0.07 to +0.11. Hugging Face's cast took it after (a Zen 3 VM, forty-third session, five
// alternating rounds, kernel GB/s medians, one thread / two): f16 16384x1024 7.4 -> 12.4 / 14.7
// -> 21.6, 4096x4096 9.1 -> 11.0 / 14.7 -> 17.9; bf16 4096x4096 6.3 -> 7.2 / 11.8 -> 12.4,
// 16384x1024 6.6 -> 6.1 / 10.2 -> 12.0 (bf16 rows run at 5-7 GB/s there either way; not profiled).
constexpr int64_t kFusedMinCols = 1024;
constexpr int64_t kFusedMaxCols = 4096;

// A row with both a weight and a bias (LayerNorm, LayerNorm then add) at more than
// kFusedAffineMaxCols columns keeps the two passes (but long rows, below) where the loop's
// working set outgrows a 48 KiB L1: f32 rows (at 4096 columns the row being finished, its fp32
// weight and bias, and the next row: 64 KiB), and f16/bf16 rows with a skip added last (48 KiB
// and the skip's 8 KiB row), where RMSNorm's f32 rows (48 KiB) and LayerNorm's f16/bf16 rows
// without a skip (48 KiB) do not. On the Intel VM (BENCHMARKS.md, issue 16, fifty-fourth
// session), one thread, four alternating rounds, ratio to memcpy: LayerNorm f32 4096x4096 0.69
// (0.64-0.74) in the loop, 0.79 (0.77-0.80) in two passes; LayerNorm then add f32 the same either
// way (0.69, 0.70); every other f32 row 0.05-0.20 faster in the loop (RMSNorm 4096x4096 0.97
// against 0.82). On the Zen 5 VM the loop had measured LayerNorm f32 4096x4096 the same either
// way (0.64-0.67, forty-second session). f16/bf16 at 4096x4096 on the Intel VM (sixtieth
// session), one thread / two, kernel GB/s medians of four alternating rounds: LayerNorm then add
// f16 11.1 / 26.1 in the loop, 14.0 / 28.2 in two passes, bf16 11.1 / 29.0 and 14.7 / 29.5
// (three earlier rounds: f16 9.8 / 19.6 and 10.7 / 24.0, bf16 10.8 / 22.2 and 11.1 / 27.4);
// LayerNorm f16/bf16 faster in the loop (11.4 / 27.9 against 9.9 / 22.4, 13.2 / 24.5 against
// 10.9 / 23.4).
constexpr int64_t kFusedAffineMaxCols = 2048;

// Rows of at least kFusedLongRowBytes (the 1024x65536 cases: 128-256 KiB a row, from memory)
// take the one-loop pass too, the weight and bias with them however long, and fetch
// kFusedLongAheadBytes ahead (the shorter rows' kFusedAheadBytes, below, measured within the
// spread). Apart, the statistics pass reads the row from memory (about 11-13 GB/s on one
// thread of the Intel VM) and the epilogue then streams its output out; in one loop the two
// overlap as in a copy. On the Intel VM (BENCHMARKS.md, issue 16, fifty-ninth session), one
// thread / two, three alternating rounds against the two passes, medians of the ratio to memcpy
// at 1024x65536: f32 LayerNorm 0.55 / 0.59 -> 0.66 / 0.70, RMSNorm 0.73 / 0.80 -> 0.82 / 0.87,
// Hugging Face's 0.72 / 0.79 -> 0.79 / 0.83, L2 0.82 / 0.87 -> 0.92 / 0.94, LayerNorm then add
// 0.55 / 0.57 -> 0.66 / 0.68, Gemma's 0.77 / 0.81 -> 0.77 / 0.83; bf16 +0.02 to +0.09 one thread
// (RMSNorm 0.57 -> 0.66, LayerNorm 0.53 -> 0.60). f16 rows moved -0.06 to +0.03 there (seven
// exploratory rounds) and kept the two passes until the Zen 4 VM (1 MiB L2; sixty-seventh
// session, five alternating rounds, the same medians) measured them faster in the loop: RMSNorm
// 1.06 / 0.94 -> 1.11 / 1.12, Gemma's 0.97 / 0.86 -> 1.11 / 1.12, Hugging Face's 0.80 / 0.88 ->
// 0.84 / 0.97, the partial statistics 0.87 / 0.87 -> 0.96 / 0.97, L2 1.21 / 1.01 -> 1.31 / 1.12,
// LayerNorm then add 0.55 / 0.72 -> 0.57 / 0.74. LayerNorm's rows on a smaller L2 keep the two
// passes (LongAffineLoopFits, below).
constexpr int64_t kFusedLongRowBytes = 64 << 10;
constexpr int64_t kFusedLongAheadBytes = 16 << 10;

// Whether a long row with both a weight and a bias and no skip (LayerNorm) takes the one-loop
// pass on a core with `l2_bytes` of L2: where what the loop holds from one row to the next (the
// row being finished, the next row, the fp32 weight and bias) is at most half of it, or where
// the size is unknown (0). The Intel VM (2 MiB L2) measured the loop faster
// (kFusedLongRowBytes); the Zen 4 VM (1 MiB L2) the two passes, which keep the fetch ahead of
// the statistics pass. There (BENCHMARKS.md, issue 16, sixty-sixth and sixty-seventh sessions),
// one thread / two, ratio to memcpy at 1024x65536, medians of nine alternating rounds in two
// sets: LayerNorm f32 0.65 / 0.81 in the loop, 0.78 / 0.88 in two passes; bf16 0.65 / 0.73 and
// 0.74 / 0.79. The L2 is the one difference known between the two VMs, so the rule follows it;
// a third machine may disagree. Rows the rule does not name kept the loop there: with a skip
// added last (LayerNorm then add f32 0.80 / 0.87 in the loop, 0.68 / 0.77 in two passes) and
// with a weight alone (RMSNorm f32 0.89 / 1.06 and 0.58 / 0.68; Gemma's, Hugging Face's, the
// partial statistics alike), though they hold as much or more.
inline bool LongAffineLoopFits(DType t, int64_t cols, int64_t l2_bytes) {
  const int64_t held = cols * (2 * static_cast<int64_t>(ElementSize(t)) + 2 * 4);
  return l2_bytes == 0 || 2 * held <= l2_bytes;
}

// Whether a row of `cols` columns in dtype t, kFusedMinCols or more, with a skip added last or
// not, takes the one-loop pass where the kernel's other rules (row_norm_simd.cc) let it: up to
// kFusedMaxCols columns but rows with both a weight and a bias beyond kFusedAffineMaxCols in
// f32 or with a skip, and long rows (kFusedLongRowBytes) but LayerNorm's where LongAffineLoopFits
// says not.
inline bool OneLoopFits(DType t, bool weight, bool bias, bool skip, int64_t cols) {
  if (cols * static_cast<int64_t>(ElementSize(t)) >= kFusedLongRowBytes) {
    return !weight || !bias || skip || LongAffineLoopFits(t, cols, L2CacheBytes());
  }
  return cols <= kFusedMaxCols &&
         !(weight && bias && (t == DType::kF32 || skip) && cols > kFusedAffineMaxCols);
}

// Whether a row with a residual added first (the fused adds: RMSNorm with a weight, LayerNorm
// with a weight and a bias) takes the one-loop pass, its h streamed out beside the next row's
// sums and formed again from x and the skip in this row's epilogue: f32 rows of kFusedMinCols
// to kFusedMaxCols columns and long ones (kFusedLongRowBytes); OneLoopFits' rules are not theirs.
// On the Intel VM (BENCHMARKS.md, issue 16, fifty-ninth session), one thread / two, four
// alternating rounds against the two passes, medians of the ratio to memcpy at 1024x65536: fused
// add+RMSNorm f32 0.52 / 0.53 -> 0.84 / 0.84, fused add+LayerNorm f32 0.56 / 0.57 -> 0.78 / 0.77;
// bf16 the same either way (0.68 / 0.72 and 0.61 / 0.64 in two passes), f16 slower in the loop
// (0.69 -> 0.58, 0.63 -> 0.56): both keep the two passes. The shorter f32 rows took it later
// (sixty-first session, four rounds, the same medians): fused add+RMSNorm 4096x4096 0.68 / 0.66 ->
// 0.91 / 0.93, 16384x1024 0.72 / 0.70 -> 1.04 / 1.08, fused add+LayerNorm 16384x1024 0.72 / 0.72 ->
// 0.99 / 1.03; at 4096x4096, where LayerNorm's weight and bias beside the row outgrow L1
// (kFusedAffineMaxCols), its fused add still gained in the loop, whose two passes write h and read
// it back: 0.65 / 0.67 -> 0.90 / 0.87 (three rounds).
inline bool OneLoopAddFits(DType t, int64_t cols) {
  return t == DType::kF32 && (cols <= kFusedMaxCols ||
                              cols * static_cast<int64_t>(ElementSize(t)) >= kFusedLongRowBytes);
}

// How far ahead of its sums the one-loop pass fetches the next rows' input into L2. On a Zen 5
// VM (BENCHMARKS.md, issue 16, thirty-eighth session), with the hardware's prefetch alone,
// LayerNorm and RMSNorm f16/bf16 ran this loop at 0.36-0.66 of memcpy at 4096x4096, and a
// probe of its shape (bf16 LayerNorm) at 0.46-0.55 with an fp32 weight and bias, above it
// without them, 0.8-1.0 with them and a fetch 4-16 KiB ahead. In normd, one thread, five
// alternating rounds: LayerNorm bf16 0.36-0.44 -> 0.53-0.66, f16 0.44-0.51 -> 0.64-0.76,
// RMSNorm bf16 0.49-0.66 -> 0.70-0.86, f16 0.46-0.57 -> 0.65-0.85 (4 KiB and 16 KiB ahead
// measured too: 8 KiB as good or better); at 16384x1024 unchanged within the spread. A later
// check (thirty-ninth session, three rounds) had bf16 better at 4 KiB and f16 worse; bf16 at
// 4 KiB with f16 at 8 KiB was then no better than 8 KiB for both in six rounds (fortieth).
constexpr int64_t kFusedAheadBytes = 8 << 10;
inline int64_t FusedAheadBytes(int64_t row_bytes) {
  return row_bytes >= kFusedLongRowBytes ? kFusedLongAheadBytes : kFusedAheadBytes;
}

// How many rows the one-loop pass's sums run ahead of its epilogue: two for rows of at most
// kFusedLeadTwoMaxBytes of input, one for longer rows. Between two rows the loop finishes
// one row's statistics (the lanes' sums in double, a square root, a division) and its
// epilogue waits for them; a row's loop that sums the row after next has the next row's
// statistics in hand, so that chain runs beside a whole row's work. At 1024 columns of
// f16/bf16 (2 KiB) the time between the rows' loops was about a quarter of the kernel's
// (`perf annotate`, RMSNorm f16 16384x1024, against 6% at 4096 columns). Measured on a Zen 5
// VM (BENCHMARKS.md, issue 16, seventy-fourth session, ten alternating pairs with one build),
// one thread, medians of the pairs: the RMSNorm forms (f16, bf16) and L2 f16 at 16384x1024 +0.03
// to +0.085 of memcpy, L2 bf16 -0.01; two threads within the VM's noise. Rows of 4 and 8 KiB
// (16384x1024 f32, 4096x4096 f16/bf16) moved -0.055 to +0.065 (six pairs), LayerNorm f16
// 4096x4096 behind in five pairs of six: they stay at one row.
constexpr int64_t kFusedLeadTwoMaxBytes = 2 << 10;
inline int64_t FusedLead(int64_t row_bytes) { return row_bytes <= kFusedLeadTwoMaxBytes ? 2 : 1; }

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_ROW_PLAN_H_
