// Entry point of the SIMD row-norm kernel (LayerNorm, RMSNorm, L2Norm and their residual
// fusions), dispatched at run time to the best Highway target of this CPU. Stateless apart
// from per-thread scratch; safe to call concurrently on disjoint row ranges.
#ifndef NORMD_KERNELS_CPU_ROW_NORM_SIMD_H_
#define NORMD_KERNELS_CPU_ROW_NORM_SIMD_H_

#include <cstdint>

#include "normd/kernels/ops.h"

namespace normd::kernels::cpu {

// Per-call constants prepared once: (offset + weight) and bias (nullptr when absent), `cols`
// elements each of `dtype`: fp32 (the caller's arrays, or widened, the offset added), or the
// caller's f16/bf16 arrays read in place where row_plan.h's ParamsInPlace says, with the
// offset added as each vector is widened. The kernel reads nothing past them.
struct RowParams {
  const void* weight = nullptr;
  const void* bias = nullptr;
  DType dtype = DType::kF32;
  float offset = 0;     // nonzero only with dtype f16/bf16
  bool stream = false;  // non-temporal stores: the output is larger than the last-level cache
};

// Computes rows [row_begin, row_end) of `a`.
void RowNormRows(const RowNormArgs& a, const RowParams& p, int64_t row_begin, int64_t row_end);

// The statistics RowNormRows computes for row `row` of `a` (its residual added), as the
// kernel computes them: the mean (LayerNorm; 0 otherwise) and the inverse scale (1/sigma,
// 1/rms, 1/norm). For tests of docs/semantics.md's rule on the statistics themselves.
void RowStatistics(const RowNormArgs& a, int64_t row, double* mean, double* scale);

// For tests of the one-loop pass of large rows (fused_rows-inl.h), which promises LoadRow's
// sums to the bit: the sums of row `next` (n elements of dtype t; its first m enter them,
// RMSNorm's partial statistics where m < n) as that pass forms them while it writes an
// epilogue of row x into y (mean 1 for moments, else 0; scale 1; no parameters), into
// fused[0..2] (sum, squares, shift), and as LoadRow forms them, into loaded[0..2].
// `moments`: LayerNorm's statistic (m must be n), else RMSNorm's sum of squares. False where
// the pass does not apply (this CPU's target narrower than AVX2, n or m not whole blocks, y
// not element-aligned).
bool OneLoopSums(DType t, bool moments, const void* x, const void* next, int64_t n, int64_t m,
                 void* y, double fused[3], double loaded[3]);

// dst[0, n) <- src widened to fp32 (exactly) plus `offset` (one fp32 addition), padded to a
// whole vector (the padding is zero when offset is).
// REQUIRES: dst has room for n + kRowPad floats, and is aligned as AllocateAligned's.
void WidenToF32(DType t, const void* src, int64_t n, float offset, float* dst);

// Whether p[0, n) holds a NaN (nan_scan.cc).
bool AnyNaN(const float* p, int64_t n);

// Whether the target the kernels dispatch to rounds fp32 to bf16 with every NaN exact
// (AVX512_BF16's conversion, convert-inl.h): a NaN's upper half, quiet, as BF16FromF32 and
// BF16SafeNaN give it. There a bf16 output needs no scan of its fp32 parameters (nan_scan.cc).
bool BF16StoresKeepNaNs();

// Floats of padding every row buffer needs past `cols`.
inline constexpr int64_t kRowPad = 64;

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_ROW_NORM_SIMD_H_
