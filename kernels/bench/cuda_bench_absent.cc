// normd-kernel-bench --cuda in a build without the CUDA toolkit: there are no CUDA kernels
// to time.
#include <cstdio>

#include "kernels/bench/cuda_bench.h"

namespace normd::kernels::bench {

int RunCudaBench(const CudaBenchFlags&) {
  std::fprintf(stderr,
               "normd-kernel-bench: this build has no CUDA backend (configured without nvcc)\n");
  return 1;
}

}  // namespace normd::kernels::bench
