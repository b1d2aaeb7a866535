// Timing of a kernel against memcpy for the kernel benchmarks (normd-kernel-bench,
// normd-plain-bench): alternating batches of each, so that both see the same drift of a
// shared machine's memory bandwidth. Stateless; call from one thread at a time per pair of
// functions (they are run as given).
#ifndef NORMD_KERNELS_BENCH_BENCH_TIMING_H_
#define NORMD_KERNELS_BENCH_BENCH_TIMING_H_

#include <cstdint>
#include <functional>

namespace normd::kernels::bench {

// Calls of fn per timed batch so that one batch takes at least `batch` seconds (after one
// call to warm up: page faults, caches, thread wake-up).
int64_t Calibrate(const std::function<void()>& fn, double batch);

// Seconds per call of fn over one batch of `iters` calls.
double TimeBatch(const std::function<void()>& fn, int64_t iters);

// The kernel and memcpy timed in alternating batches (`repeats` of each, at least
// min_time / repeats seconds a batch): the machine's memory bandwidth drifts by tens of
// percent over seconds on a shared VM, and neighbouring batches see the same drift.
// `kernel` and `copy` are the median seconds per call of each; `ratio` the median of the
// batch pairs' ratios (memcpy time / kernel time: the kernel's speed as a fraction of
// memcpy's).
struct PairTiming {
  double kernel, copy, ratio;
};
PairTiming TimeAgainstCopy(const std::function<void()>& kernel, const std::function<void()>& copy,
                           double min_time, int repeats = 7);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_BENCH_TIMING_H_
