// What one thread's memory does by buffer size, for the kernel benchmarks' context: a copy
// and a read of a buffer a last-level cache holds, beside one no cache holds. On a shared VM
// the cache is the host's and its share moves with the neighbours, so the "memory" a case
// of tens of MiB meets is partly cache, more so on some days than others (BENCHMARKS.md,
// issue 16, fifty-eighth session); the probe puts that day's figures in the run's output.
// Stateless; call from one thread at a time (it times the calling thread).
#ifndef NORMD_KERNELS_BENCH_MEMORY_PROBE_H_
#define NORMD_KERNELS_BENCH_MEMORY_PROBE_H_

#include <cstddef>
#include <vector>

namespace normd::kernels::bench {

struct MemoryProbe {
  size_t bytes;      // the buffer's size
  double copy_gbps;  // memcpy of the buffer into another, bytes read and written per second
  double read_gbps;  // one 8-byte load a cache line over the buffer: lines' bytes per second
};

// Each size in turn (its buffers allocated, touched, timed and freed): the copy and the read
// in alternating batches (TimeAgainstCopy, bench_timing.h), the median of each.
std::vector<MemoryProbe> ProbeMemory(const std::vector<size_t>& sizes, double min_time);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_MEMORY_PROBE_H_
