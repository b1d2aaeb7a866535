// CudaBackend's plumbing (see cuda_backend_impl.h): per-call device and pinned memory,
// error checks with sticky-error health, and MakeCudaBackend.
#include <cuda_runtime.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "normd/kernels/cuda_backend.h"

namespace normd::kernels {
namespace cuda {

absl::Status CudaBackend::Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  // Errors that poison the context stay reported by every later call.
  if (cudaPeekAtLastError() != cudaSuccess || e == cudaErrorIllegalAddress ||
      e == cudaErrorLaunchFailure || e == cudaErrorHardwareStackError ||
      e == cudaErrorIllegalInstruction || e == cudaErrorMisalignedAddress ||
      e == cudaErrorInvalidPc || e == cudaErrorECCUncorrectable) {
    healthy_ = false;
  }
  return absl::InternalError(absl::StrCat("CUDA ", what, ": ", cudaGetErrorName(e), ": ",
                                          cudaGetErrorString(e),
                                          healthy_ ? "" : " (backend marked unhealthy)"));
}

absl::StatusOr<CudaBackend::Call> CudaBackend::Begin(int64_t bytes) {
  if (!healthy_) {
    return absl::UnavailableError("CUDA backend unhealthy after a device error");
  }
  Call call;
  call.stream = streams_[next_stream_.fetch_add(1) % streams_.size()];
  cudaSetDevice(device_);
  void* dev = nullptr;
  if (absl::Status s =
          Check(allocator_.DeviceAllocate(device_, &dev, bytes, call.stream), "device allocation");
      !s.ok()) {
    return s;
  }
  call.dev = static_cast<char*>(dev);
  {
    absl::MutexLock l(&pinned_mu_);
    auto best = pinned_.end();
    for (auto it = pinned_.begin(); it != pinned_.end(); ++it) {
      if (it->bytes >= bytes && (best == pinned_.end() || it->bytes < best->bytes)) best = it;
    }
    if (best != pinned_.end()) {
      call.host = static_cast<char*>(best->ptr);
      call.host_bytes = best->bytes;
      pinned_.erase(best);
    }
  }
  if (call.host == nullptr) {
    void* host = nullptr;
    const int64_t size = std::max<int64_t>(bytes, 1 << 20);
    if (absl::Status s = Check(cudaHostAlloc(&host, size, cudaHostAllocDefault), "pinned alloc");
        !s.ok()) {
      allocator_.DeviceFree(device_, call.dev);
      return s;
    }
    call.host = static_cast<char*>(host);
    call.host_bytes = size;
  }
  return call;
}

void CudaBackend::End(Call& call) {
  if (call.dev != nullptr) allocator_.DeviceFree(device_, call.dev);
  if (call.host != nullptr) {
    absl::MutexLock l(&pinned_mu_);
    pinned_.push_back({call.host, call.host_bytes});
  }
}

}  // namespace cuda

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& options) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return absl::UnavailableError(
        absl::StrCat("no CUDA driver or device: ", cudaGetErrorString(e)));
  }
  if (options.device < 0 || options.device >= count) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", options.device, " absent: ", count, " device(s)"));
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, options.device) != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError("CUDA device properties unavailable");
  }
  std::string description =
      absl::StrCat(prop.name, ", sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount,
                   " SMs, ", prop.totalGlobalMem >> 20, " MiB");
  return std::unique_ptr<Backend>(new cuda::CudaBackend(
      options.device, options.streams, std::move(description), prop.multiProcessorCount));
}

}  // namespace normd::kernels
