#include "normd/kernels/cpu_backend.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "hwy/targets.h"
#include "kernels/cpu/thread_pool.h"

namespace normd::kernels {

CpuBackend::CpuBackend(CpuBackendOptions options) : options_(options) {
  if (options_.threads <= 0) {
    options_.threads = std::max(1u, std::thread::hardware_concurrency());
  }
  pool_ = std::make_unique<cpu::ThreadPool>(options_.threads);
}

CpuBackend::~CpuBackend() = default;

int CpuBackend::threads() const { return pool_->threads(); }

std::string CpuBackend::device() const {
#if defined(__x86_64__)
  const char* arch = "x86_64";
#elif defined(__aarch64__)
  const char* arch = "aarch64";
#else
  const char* arch = "cpu";
#endif
  return absl::StrCat(arch, ", ", threads(), " threads, SIMD ", SimdTarget());
}

std::string CpuBackend::SimdTarget() {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

int64_t CpuBackend::JobBytes(int64_t elements, DType in, DType out) {
  return elements * static_cast<int64_t>(ElementSize(in) + ElementSize(out));
}

int CpuBackend::ThreadsFor(int64_t job_bytes, int max_threads) const {
  return job_bytes < options_.min_parallel_bytes ? 1 : std::min(max_threads, threads());
}

}  // namespace normd::kernels
