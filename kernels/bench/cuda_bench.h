// normd-kernel-bench --cuda: the CUDA kernels on tensors already in device memory, timed with
// CUDA events beside a device-to-device copy of the same traffic (cuda_bench.cc); in a build
// without CUDA, a message that there is none (cuda_bench_absent.cc). Single-threaded.
#ifndef NORMD_KERNELS_BENCH_CUDA_BENCH_H_
#define NORMD_KERNELS_BENCH_CUDA_BENCH_H_

#include <string>

namespace normd::kernels::bench {

struct CudaBenchFlags {
  std::string filter = ".*";  // cases whose op/dtype/shape matches
  std::string json;           // where to write the rows too (empty: nowhere)
  double min_time = 0.25;     // seconds of kernel batches per case, as the CPU benchmark's
  int device = 0;
};

// Runs the benchmark over normd-kernel-bench's cases (bench_cases.h) that match; prints the
// table and returns the program's exit status (1 when there is no device, a CUDA call
// fails, or an output differs from the CPU backend's).
int RunCudaBench(const CudaBenchFlags& flags);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_CUDA_BENCH_H_
