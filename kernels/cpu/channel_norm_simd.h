// SIMD primitives of the per-channel ops (BatchNorm, GroupNorm, InstanceNorm), dispatched
// at run time to the best Highway target. Statistics are fp32 blocks gathered in double
// (row_pass-inl.h, shifted_sums-inl.h), or double where asked (`f64`); outputs are
// computed in fp32 from the mean split in two floats, as docs/semantics.md's accuracy rule
// allows. Stateless apart from per-thread scratch; safe to call concurrently on disjoint
// outputs.
#ifndef NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_
#define NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_

#include <cstdint>

#include "normd/kernels/dtype.h"

namespace normd::kernels::cpu {

// Mean and sum of squared deviations of n contiguous elements: fp32 blocks gathered in
// double, the mean within ~2^-22 sigma and M2 within ~2^-21 relative (kFp32MeanError).
// `f64`: in double, for BatchNorm's mean where sigma is large beside it (the mean is an
// output held to the F32 rule): one pass of sums shifted by an element where that is exact
// (shifted_sums-inl.h), else a sum and a centred pass.
void RunMoments(DType t, const void* x, int64_t n, bool f64, double* mean, double* m2);

// y[i] = (x[i] - mean) * scale + shift over n contiguous elements. `stream`: y written
// with non-temporal stores (outputs larger than the cache), not fenced: the caller calls
// FenceStreams() after its last run, before another thread may read y.
// `prefetch` (may be null): n elements of dtype t, the next pass's run, brought into the
// cache while this one is written.
void ApplyRun(DType t, const void* x, int64_t n, double mean, double scale, double shift, DType out,
              void* y, bool stream, const void* prefetch = nullptr);

// Orders this thread's non-temporal stores before its later stores (an sfence on x86):
// what a thread that streamed runs calls once before it signals that y is done.
void FenceStreams();

// Per-column mean and M2 (sum of squared deviations) of a rows x cols block (row-major,
// row stride cols): one pass of fp32 sums gathered in double where they are exact enough
// (the mean within ~2^-22 sigma, M2 within ~2^-21 relative, as RunMoments' fp32 blocks),
// unless `f64`; else one pass of double sums shifted by the first row, or where that is not
// exact either, a sum and a centred pass.
void ColumnMoments(DType t, const void* x, int64_t rows, int64_t cols, bool f64, double* mean,
                   double* m2);

// y[r, c] = (x[r, c] - mean[c]) * scale[c] + shift[c] over a rows x cols block; `stream`
// as for ApplyRun.
void ApplyColumns(DType t, const void* x, int64_t rows, int64_t cols, const double* mean,
                  const double* scale, const double* shift, DType out, void* y, bool stream);

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_
