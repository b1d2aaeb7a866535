// Declares, for each SIMD target, the one-loop pass of large rows read in place (fused_rows.cc):
// row r's epilogue streamed out while row r+1's sums are read, so that memory reads and
// writes at once, as a copy does, where a row's two passes took turns (the statistics
// reading, the epilogue writing). Include after hwy/highway.h inside a translation unit
// that uses foreach_target (row_norm_simd.cc, fused_rows.cc). Stateless; safe from any
// thread.
// Per-target include guard: each target's pass through this file needs its own copy.
#if defined(NORMD_KERNELS_CPU_FUSED_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMD_KERNELS_CPU_FUSED_ROWS_INL_H_
#undef NORMD_KERNELS_CPU_FUSED_ROWS_INL_H_
#else
#define NORMD_KERNELS_CPU_FUSED_ROWS_INL_H_
#endif

#include <cstdint>

#include "kernels/cpu/convert-inl.h"
#include "kernels/cpu/row_epilogue-inl.h"
#include "kernels/cpu/row_pass-inl.h"

HWY_BEFORE_NAMESPACE();
namespace normd::kernels::cpu {
namespace HWY_NAMESPACE {

// The part of a row's output a FusedRowPairFn wrote: elements [begin, end); begin < 0 where
// it did nothing (the caller takes the two passes for that row and the next).
struct FusedSpan {
  int64_t begin = -1, end = -1;
};

// The weight and bias (either null where absent) in paired lanes' order: in each block of
// 2 * Lanes(D) elements, the even elements first, then the odd ones. On AVX2 a bf16 row's
// epilogue widens sixteen elements into two fp32 vectors with a shift and an and, the even
// and the odd ones, and packs its two results back with a shift and a blend, where in order it
// took two widenings of two instructions each and a pack and a lane permute; each lane's
// arithmetic is the same, so are the bits. The parameters' lanes must be in that order too.
struct PairedParams {
  const float* weight = nullptr;
  const float* bias = nullptr;
};

// Streams row x's epilogue `e` (x the input row read in place, f32 or f16/bf16, no
// residual add before the statistics, y in x's dtype) into y[begin, end), and returns in
// *next_sums the sums of row `next` over its first m of n columns (m < n: RMSNorm's partial
// statistics, whose next row is still fetched whole) as LoadRow<kT, kStat, false, false,
// false> gives them, to the bit; elements [0, begin) and [end, n) of y are the caller's
// (EpilogueStore's, the same bits). begin is where y's non-temporal stores can start
// (StreamHead); it does nothing where n or m is not a whole number of LoadRow's blocks
// (sixteen vectors for f16/bf16 moments, else eight), where y is not element-aligned, or where
// EpilogueStore would take the other of its forms for a row with and without a mean
// (NoMean).
// `paired`: e's weight and bias in paired lanes' order (PairParams), for the targets that
// read bf16 rows so; null elsewhere, or to read them in order.
// `add`: for a residual added first (the fused adds; else all null): this row's skip, the
// next row's, and the next row's h (null where the call returns none), to which the loop
// streams h = x + alpha * skip (REQUIRES: vector-aligned; else the call does nothing). The
// sums are then of h, as LoadRow<kT, kStat, true, ...> gives them, and the epilogue forms
// this row's h again from x and its skip (ResidualAdd: the bits of h); m must be n.
struct FusedAdd {
  const void* skip = nullptr;
  const void* next_skip = nullptr;
  void* next_h = nullptr;
};
using FusedRowPairFn = FusedSpan (*)(const void* x, const void* next, int64_t n, int64_t m,
                                     const Epilogue& e, const PairedParams* paired, void* y,
                                     RowSums* next_sums, const FusedAdd& add);

// Where this target's one-loop pass reads rows of dtype t in paired lanes (AVX2, bf16): the
// n-element weight and bias (either may be null) in paired lanes' order, in a buffer of the
// calling thread's that the next call on it reuses, into *out; returns out, or null where the
// target reads rows of t in order.
const PairedParams* PairParams(DType t, const float* weight, const float* bias, int64_t n,
                               PairedParams* out);

// The instantiation for the statistic (kMoments or kSumOfSquares), the input dtype, the
// parameters present, a skip added last (`skip`: e.skip, in x's dtype, whose rows follow
// each other as x's do; the next row's is fetched) and RMSNorm's cast_before_weight (`cast`:
// the normalized value rounded to x's dtype before the weight, Hugging Face's order; f16/bf16
// sums of squares only); nullptr where there is none (other statistics, targets narrower
// than AVX2: those rows take the two passes).
// `add_first`: a residual added before the statistics (FusedAdd), returning h or not (`h`):
// f32 RMSNorm with a weight and LayerNorm with a weight and a bias, not with `skip`.
FusedRowPairFn PickFusedRowPair(DType t, Stat stat, bool weight, bool bias, bool skip, bool cast,
                                bool add_first = false, bool h = false);

}  // namespace HWY_NAMESPACE
}  // namespace normd::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // NORMD_KERNELS_CPU_FUSED_ROWS_INL_H_
