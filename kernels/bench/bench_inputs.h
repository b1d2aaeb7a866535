// The inputs of the kernel benchmarks (normd-kernel-bench, normd-plain-bench): the same
// values in both, so that their figures are of the same data. Stateless; safe from any
// thread on disjoint buffers.
#ifndef NORMD_KERNELS_BENCH_BENCH_INPUTS_H_
#define NORMD_KERNELS_BENCH_BENCH_INPUTS_H_

#include <cstdint>

#include "normd/kernels/dtype.h"

namespace normd::kernels::bench {

// bytes[0, n) <- N(0.5, 2) values rounded to dtype t, from `seed`: a pattern of 2^16
// values repeated (fast to fill at hundreds of MiB).
void FillNormal(DType t, void* bytes, int64_t n, uint32_t seed);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_BENCH_INPUTS_H_
