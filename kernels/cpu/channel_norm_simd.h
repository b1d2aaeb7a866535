// SIMD primitives of the per-channel ops (BatchNorm, GroupNorm, InstanceNorm), dispatched
// at run time to the best Highway target. Column sums are in double, run statistics in
// double or in fp32 blocks (row_pass-inl.h); outputs are computed in fp32 from the mean
// split in two floats, as docs/semantics.md's accuracy rule allows. Stateless apart from per-thread
// scratch; safe to call concurrently on disjoint outputs.
#ifndef NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_
#define NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_

#include <cstdint>

#include "normd/kernels/dtype.h"

namespace normd::kernels::cpu {

// Mean and sum of squared deviations of n contiguous elements. `f64`: centred sums in
// double, for statistics that are outputs (BatchNorm's mean and variance, held to the F32
// rule); else fp32 blocks, within ~2^-22 (GroupNorm, InstanceNorm).
void RunMoments(DType t, const void* x, int64_t n, bool f64, double* mean, double* m2);

// y[i] = (x[i] - mean) * scale + shift over n contiguous elements. `stream`: y written
// with non-temporal stores (outputs larger than the cache), fenced before returning.
void ApplyRun(DType t, const void* x, int64_t n, double mean, double scale, double shift, DType out,
              void* y, bool stream);

// Column statistics of a rows x cols block (row-major, row stride cols):
// sum[c] += sum of column c; m2[c] += sum of (x - mean[c])^2 over column c.
void ColumnSums(DType t, const void* x, int64_t rows, int64_t cols, double* sum);
void ColumnCenteredSquares(DType t, const void* x, int64_t rows, int64_t cols, const double* mean,
                           double* m2);

// y[r, c] = (x[r, c] - mean[c]) * scale[c] + shift[c] over a rows x cols block; `stream`
// as for ApplyRun.
void ApplyColumns(DType t, const void* x, int64_t rows, int64_t cols, const double* mean,
                  const double* scale, const double* shift, DType out, void* y, bool stream);

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_
