// How the kernel benchmarks check that what they timed computed the op: one kernel's
// outputs against another's on the same inputs (normd-plain-bench: a plain kernel against
// normd's; normd-kernel-bench --cuda: the CUDA kernels against the CPU backend's). Stateless;
// safe from any thread.
#ifndef NORMD_KERNELS_BENCH_BENCH_CHECK_H_
#define NORMD_KERNELS_BENCH_BENCH_CHECK_H_

#include <cstdint>

#include "normd/kernels/dtype.h"

namespace normd::kernels::bench {

// max |a - b| over max |b| of n elements of dtype t (infinite where only one is NaN).
double Difference(DType t, const void* a, const void* b, int64_t n);

// What two kernels' outputs on the benchmarks' inputs may differ by, relative to the
// largest output: four ulps of 1 in f16/bf16 (outputs of a few units, each rounded once),
// and in f32 what fp32 sums down 3136 rows in one accumulator (the plain kernels',
// channels last) may lose, 3136 * 2^-24 = 1.9e-4 at worst (measured up to 1.1e-5). A wrong
// op or parameter is far beyond either.
double Tolerance(DType t);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_BENCH_CHECK_H_
