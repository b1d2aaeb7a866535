// SIMD primitives of the per-channel ops (BatchNorm, GroupNorm, InstanceNorm), dispatched
// at run time to the best Highway target. Statistics are fp32 blocks gathered in double
// (row_pass-inl.h, shifted_sums-inl.h), or double where asked (`f64`); outputs are
// computed in fp32 from the mean split in two floats, as docs/semantics.md's accuracy rule
// allows. Stateless apart from per-thread scratch; safe to call concurrently on disjoint
// outputs.
#ifndef NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_
#define NORMD_KERNELS_CPU_CHANNEL_NORM_SIMD_H_

#include <cstddef>
#include <cstdint>

#include "hwy/base.h"
#include "normd/kernels/dtype.h"

namespace normd::kernels::cpu {

// Mean and sum of squared deviations of n contiguous elements: fp32 blocks gathered in
// double, the mean within ~2^-22 sigma and M2 within ~2^-21 relative (kFp32MeanError).
// `f64`: in double, for BatchNorm's mean where sigma is large beside it (the mean is an
// output held to the F32 rule): one pass of sums shifted by an element where that is exact
// (shifted_sums-inl.h), else a sum and a centred pass.
void RunMoments(DType t, const void* x, int64_t n, bool f64, double* mean, double* m2);

// The statistics of the next run (a group, a channel's run), summed a block at a time while
// ApplyRun writes the current one: RunMoments' one pass without f64, its blocks in the same
// order, so the same bits, but summed while the output pass waits on memory (the sums alone
// are bound by arithmetic, half the time of the output pass in f16/bf16).
// BeginRunSums, then ApplyRun calls with it (which sum as many elements as they write), then
// FinishRunSums. Plain data owned by one thread; not thread-safe.
inline constexpr int64_t kRunSumsMax = int64_t{1} << 16;  // RunMoments' one-pass chunk
struct RunSumsCursor {
  static constexpr size_t kLanes = hwy::kMaxVectorSize / sizeof(double);
  DType t = DType::kF32;
  const void* x = nullptr;
  int64_t n = 0, done = 0;  // done: elements summed, in whole blocks
  float shift = 0;
  alignas(64) double acc[4][kLanes] = {};  // the target's double accumulators
};

// Starts `c` on n <= kRunSumsMax contiguous elements of dtype t (reads its first vectors).
void BeginRunSums(DType t, const void* x, int64_t n, RunSumsCursor* c);

// Sums what ApplyRun has not, and returns RunMoments(c.t, c.x, c.n, false, ...)'s mean and
// M2 (falling back to its two passes where one is not exact).
void FinishRunSums(RunSumsCursor* c, double* mean, double* m2);

// y[i] = (x[i] - mean) * scale + shift over n contiguous elements. `stream`: y written
// with non-temporal stores (outputs larger than the cache), not fenced: the caller calls
// FenceStreams() after its last run, before another thread may read y.
// `prefetch` (may be null): n elements of dtype t, the next pass's run, brought into the
// cache while this one is written. `sums` (may be null): a cursor on a run of dtype t, summed
// a block beside every block written (up to n elements of it).
void ApplyRun(DType t, const void* x, int64_t n, double mean, double scale, double shift, DType out,
              void* y, bool stream, const void* prefetch = nullptr, RunSumsCursor* sums = nullptr);

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
