// The CUDA backend's host-side class, shared by the files that implement it:
// cuda_backend.cu (device memory, pinned staging, streams, errors, MakeCudaBackend),
// cuda_row_batch.cu (RowNormBatch: one launch over a ragged segment table) and
// cuda_channel_run.cu (BatchNorm, GroupNorm). Only those .cu files include it.
//
// Thread safety: every Backend method may be called concurrently; each call takes its own
// stream (round-robin), device block (CUB's caching allocator is thread-safe) and pinned
// block (free list under pinned_mu_).
#ifndef NORMD_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
#define NORMD_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cub/util_allocator.cuh"
#include "kernels/cuda/device_ops.h"
#include "kernels/cuda/launch_args.h"
#include "normd/kernels/backend.h"

namespace normd::kernels::cuda {

constexpr int64_t kAlign = 256;
inline int64_t Round(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// One call's memory: a device block and a pinned host block carved into 256-byte aligned
// pieces at the same offsets, inputs first.
class Staging {
 public:
  // Reserves `bytes` in both blocks; returns the offset.
  int64_t Reserve(int64_t bytes) {
    const int64_t at = size_;
    size_ += Round(std::max<int64_t>(bytes, 1));
    return at;
  }
  int64_t size() const { return size_; }

 private:
  int64_t size_ = 0;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, int streams, std::string description, int sms)
      : device_(device),
        description_(std::move(description)),
        sms_(sms),
        allocator_(/*bin_growth=*/4, /*min_bin=*/8, /*max_bin=*/16, /*max_cached_bytes=*/
                   size_t{4} << 30) {
    cudaSetDevice(device_);
    streams_.resize(std::max(1, streams));
    for (auto& s : streams_) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  ~CudaBackend() override {
    cudaSetDevice(device_);
    for (auto& p : pinned_) cudaFreeHost(p.ptr);
    for (auto& s : streams_) cudaStreamDestroy(s);
  }

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string device() const override { return description_; }
  int threads() const override { return sms_; }
  bool healthy() const override { return healthy_.load(); }

  absl::Status RowNorm(const RowNormArgs& args) override {
    return RowNormBatch(absl::MakeConstSpan(&args, 1));
  }
  absl::Status RowNormBatch(absl::Span<const RowNormArgs> segments) override;
  absl::Status BatchNorm(const BatchNormArgs& args) override;
  absl::Status GroupNorm(const GroupNormArgs& args) override;

 private:
  struct Pinned {
    void* ptr;
    int64_t bytes;
  };
  // One call's stream, device block and pinned block.
  struct Call {
    cudaStream_t stream;
    char* dev = nullptr;
    char* host = nullptr;
    int64_t host_bytes = 0;
  };

  // BatchNorm and GroupNorm: stage x, weight, bias (and given statistics) in, compute the
  // statistics unless given, apply, copy y (and the statistics, when asked) back.
  // Statistics are mean[sets] then var[sets] in double.
  absl::Status RunChannel(ChannelArgs ca, const ConstTensor& x, const ConstTensor& weight,
                          const ConstTensor& bias, const MutTensor& y,
                          const std::vector<double>* stats_in, std::vector<double>* stats_out,
                          const char* what);
  absl::StatusOr<Call> Begin(int64_t bytes);
  void End(Call& call);
  // Turns a CUDA error into the call's status; a sticky one marks the backend unhealthy.
  // (absl::Status is [[nodiscard]]; nvcc warns on assignments from it wrongly, hence the
  // diagnostic suppression in CMake.)
  absl::Status Check(cudaError_t e, const char* what);

  int device_;
  std::string description_;
  int sms_;
  std::vector<cudaStream_t> streams_;
  std::atomic<unsigned> next_stream_{0};
  cub::CachingDeviceAllocator allocator_;
  absl::Mutex pinned_mu_;
  std::vector<Pinned> pinned_ ABSL_GUARDED_BY(pinned_mu_);  // free pinned blocks
  std::atomic<bool> healthy_{true};
};

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
