// The inputs of the kernel benchmarks (normd-kernel-bench, normd-plain-bench): the same
// values in both, so that their figures are of the same data, in buffers that start on a
// page. Stateless; safe from any thread on disjoint buffers.
#ifndef NORMD_KERNELS_BENCH_BENCH_INPUTS_H_
#define NORMD_KERNELS_BENCH_BENCH_INPUTS_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "normd/kernels/dtype.h"

namespace normd::kernels::bench {

// bytes[0, n) <- N(0.5, 2) values rounded to dtype t, from `seed`: a pattern of 2^16
// values repeated (fast to fill at hundreds of MiB).
void FillNormal(DType t, void* bytes, int64_t n, uint32_t seed);

struct FreeBytes {
  void operator()(unsigned char* p) const { std::free(p); }
};
using PageBytes = std::unique_ptr<unsigned char[], FreeBytes>;

// `bytes` bytes starting on a 4 KiB page, for every buffer of a case and for the memcpy
// timed beside it. Why not hwy::AllocateAligned: it starts successive large blocks at
// page offsets that differ from one allocation to the next (320, 320, 384, 448, ...), so
// where a case's buffers lay depended on how many allocations came before it; on a Zen 3
// VM glibc's streamed memcpy of 32 MiB ran at 19.6 GB/s with its destination at the
// source's page offset and at 6 GB/s one or two lines past it, so that a third to a half of
// the cases printed a limit a third of the machine's (BENCHMARKS.md, issue 16, forty-third
// session).
PageBytes AllocatePageAligned(size_t bytes);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_BENCH_INPUTS_H_
