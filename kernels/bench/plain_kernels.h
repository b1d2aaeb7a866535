// Plain kernels for normd-plain-bench: each normalizes with the same passes over memory as
// one of normd's paths (a statistics pass over a unit of work, then an output pass over it
// with non-temporal stores), in the simplest loops, so that the benchmark can show how near
// a kernel with those passes normd's path runs. Their statistics are plain fp32 sums of
// deviations from the unit's first element: they do not meet docs/semantics.md's rule
// (offset data, long rows) and serve no request. Dispatched to the best Highway target, as
// normd's kernels are. Stateless; safe from any thread on disjoint outputs.
#ifndef NORMD_KERNELS_BENCH_PLAIN_KERNELS_H_
#define NORMD_KERNELS_BENCH_PLAIN_KERNELS_H_

#include <cstdint>

#include "normd/kernels/dtype.h"

namespace normd::kernels::bench {

// InstanceNorm over `runs` contiguous runs of n elements (channels first, no affine).
void PlainRuns(DType t, const void* x, int64_t runs, int64_t n, double eps, void* y);

// InstanceNorm channels last: `samples` blocks of [rows, cols], the statistics per column
// of a block, then the block's output (no affine). At most 256 columns (it aborts).
void PlainSamples(DType t, const void* x, int64_t samples, int64_t rows, int64_t cols, double eps,
                  void* y);

// BatchNorm training channels first over [n, c, s]: per channel, its n runs' statistics,
// then their outputs (no affine, no running statistics).
void PlainChannels(DType t, const void* x, int64_t n, int64_t c, int64_t s, double eps, void* y);

// RMSNorm of rows x cols with an f32 weight.
void PlainRmsRows(DType t, const void* x, const float* weight, int64_t rows, int64_t cols,
                  double eps, void* y);

// LayerNorm of rows x cols with f32 weight and bias; `prefetch_next`: each row's output pass
// fetches the next row into L2 (prefetcht1), a line for each line it writes.
void PlainLayerRows(DType t, const void* x, const float* weight, const float* bias, int64_t rows,
                    int64_t cols, double eps, bool prefetch_next, void* y);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_PLAIN_KERNELS_H_
