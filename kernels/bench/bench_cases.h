// The shapes and ops normd-kernel-bench measures. Each case owns its buffers between
// setup() and teardown(), so the run holds one case's memory at a time. Single-threaded.
#ifndef NORMD_KERNELS_BENCH_BENCH_CASES_H_
#define NORMD_KERNELS_BENCH_BENCH_CASES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "normd/kernels/cpu_backend.h"

namespace normd::kernels::bench {

struct BenchCase {
  std::string op, dtype, shape;
  int64_t bytes = 0;  // memory traffic one run must cause (see kernel_bench.cc)
  std::function<void()> setup, teardown;
  std::function<void(CpuBackend&, int threads)> run;
  std::function<void()> reference;  // the float64 oracle on the same arguments
  // The calls run() makes, on the case's host buffers (valid from setup() to teardown()),
  // for the benchmark of another backend (cuda_bench.cc): its row calls (two for QK-norm),
  // or its one channel call.
  struct Calls {
    std::vector<RowNormArgs> rows;
    const BatchNormArgs* batch_norm = nullptr;
    const GroupNormArgs* group_norm = nullptr;
  };
  std::function<Calls()> calls;
};

// `offset`: every buffer a case allocates (inputs, outputs, parameters) starts that many
// bytes past a 64-byte boundary. 0 is the kernels' best case; a server's are where its
// transport put them (a parsed protobuf `bytes` field, glibc malloc: 16 bytes past a page
// for large ones, a multiple of 16 otherwise). `typed_params`: the row ops' weight and bias
// in the input's dtype (as a bf16 or f16 model's are), else fp32; the channel ops' are fp32.
std::vector<BenchCase> AllCases(int64_t offset = 0, bool typed_params = false);

}  // namespace normd::kernels::bench

#endif  // NORMD_KERNELS_BENCH_BENCH_CASES_H_
