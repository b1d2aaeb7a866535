// The CPU backend: every op family of ops.h with Highway SIMD kernels dispatched at run
// time to the best target of the CPU (SSE4, AVX2, AVX-512, NEON, or the portable
// fallback), on a persistent thread pool. Precision plan: means and sums of squares
// accumulated in double, squared deviations in fp32, an epilogue in double wherever an
// addition follows the scaling; one rounding to nearest even at the end.
// Denormal inputs and outputs are flushed to zero (see cpu/thread_pool.h).
//
// Thread safety: safe for concurrent calls from multiple threads; one call at a time uses
// the pool and the others run on their own thread.
#ifndef NORMD_KERNELS_CPU_BACKEND_H_
#define NORMD_KERNELS_CPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "normd/kernels/backend.h"

namespace normd::kernels {

namespace cpu {
class ThreadPool;
}

struct CpuBackendOptions {
  int threads = 0;  // 0: every core of the machine
  // Work smaller than this many bytes (input + output) runs on the calling thread: waking
  // a worker costs more than it saves. Measured with normd-kernel-bench (BENCHMARKS.md):
  // at 256 KiB two threads ran at half the speed of one, at 2 MiB 1.5-1.8x faster.
  int64_t min_parallel_bytes = 1 << 20;
  // Outputs larger than this use non-temporal stores (no read-for-ownership of output
  // lines that will not be reused from cache). Measured with normd-kernel-bench
  // --stream-bytes: from 8 MiB streaming was faster on every row-wise shape; this VM
  // reports a 105 MiB shared L3 that one core cannot hold on to. The channel ops use the
  // same threshold (BENCHMARKS.md, eighteenth and fifty-third sessions).
  int64_t stream_bytes = 8 << 20;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuBackendOptions options = {});
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string device() const override;
  int threads() const override;
  // The SIMD target the kernels dispatch to on this CPU (Highway's name, e.g. "AVX3").
  static std::string SimdTarget();

  absl::Status RowNorm(const RowNormArgs& args) override;
  // One pool dispatch over the rows of every segment (contiguous pieces of the
  // concatenated rows), on no more threads than the largest segment would get alone.
  absl::Status RowNormBatch(absl::Span<const RowNormArgs> segments) override;
  absl::Status BatchNorm(const BatchNormArgs& args) override;
  absl::Status GroupNorm(const GroupNormArgs& args) override;

  // The same with a thread limit (benchmarks compare 1 and all threads); work below
  // min_parallel_bytes still runs on one thread.
  absl::Status RowNorm(const RowNormArgs& args, int max_threads);
  absl::Status RowNormBatch(absl::Span<const RowNormArgs> segments, int max_threads);
  absl::Status BatchNorm(const BatchNormArgs& args, int max_threads);
  absl::Status GroupNorm(const GroupNormArgs& args, int max_threads);

  const CpuBackendOptions& options() const { return options_; }

 private:
  // The bytes `elements` read as `in` and written as `out` move: the pool's job size.
  static int64_t JobBytes(int64_t elements, DType in, DType out);
  // Threads for a job of job_bytes, at most max_threads: one below min_parallel_bytes.
  int ThreadsFor(int64_t job_bytes, int max_threads) const;

  CpuBackendOptions options_;
  std::unique_ptr<cpu::ThreadPool> pool_;
};

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_CPU_BACKEND_H_
