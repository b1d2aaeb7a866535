// The CUDA backend: every op family of ops.h on an NVIDIA GPU (kernels in kernels/cuda/).
// Tensors arrive in host memory; each call stages its inputs through pinned host buffers
// into device memory from a caching pool (CUB's CachingDeviceAllocator, no cudaMalloc per
// request), runs on one of several CUDA streams (calls on different streams overlap one's
// copies with another's compute), and copies the outputs back. A ragged RowNormBatch is
// one kernel launch over a segment table.
//
// Errors: a failed CUDA call fails that call with INTERNAL. A sticky error (the context
// is lost) also marks the backend unhealthy: later calls fail at once with UNAVAILABLE,
// healthy() turns false and the scheduler's AUTO routing sends work to the CPU.
//
// Thread safety: safe for concurrent calls from multiple threads.
#ifndef NORMD_KERNELS_CUDA_BACKEND_H_
#define NORMD_KERNELS_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "normd/kernels/backend.h"

namespace normd::kernels {

struct CudaBackendOptions {
  int device = 0;
  int streams = 4;
};

// The CUDA backend of device `options.device`, or UNAVAILABLE saying why there is none:
// this build has no CUDA, no driver, or no device.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& options = {});

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_CUDA_BACKEND_H_
