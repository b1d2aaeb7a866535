// MakeCudaBackend in a build without the CUDA toolkit: there is no CUDA backend, and the
// server routes everything to the CPU.
#include "normd/kernels/cuda_backend.h"

namespace normd::kernels {

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions&) {
  return absl::UnavailableError("this build has no CUDA backend (configured without nvcc)");
}

}  // namespace normd::kernels
