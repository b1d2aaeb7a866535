// CudaBackend: host side of the CUDA backend (see cuda_backend.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cub/util_allocator.cuh"
#include "kernels/cuda/device_ops.h"
#include "normd/kernels/cuda_backend.h"

namespace normd::kernels {
namespace {

using cuda::ChannelArgs;
using cuda::RowItem;
using cuda::RowSegment;

int32_t Code(DType t) {
  return t == DType::kF32 ? cuda::kDevF32 : (t == DType::kF16 ? cuda::kDevF16 : cuda::kDevBF16);
}

int64_t Bytes(const ConstTensor& t) { return t.present() ? t.numel * ElementSize(t.dtype) : 0; }
int64_t Bytes(const MutTensor& t) { return t.present() ? t.numel * ElementSize(t.dtype) : 0; }

constexpr int64_t kAlign = 256;
int64_t Round(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

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

absl::Status CudaBackend::RowNormBatch(absl::Span<const RowNormArgs> segments) {
  // Layout of the call's memory: per segment x, skip, raw weight, raw bias (inputs,
  // copied in one transfer), then the segment and item tables, then fp32 weight and bias,
  // then y and h (outputs).
  struct Offsets {
    int64_t x, skip, w_raw, b_raw, w, b, y, h;
  };
  std::vector<Offsets> off(segments.size());
  Staging st;
  for (size_t i = 0; i < segments.size(); ++i) {
    const RowNormArgs& a = segments[i];
    off[i].x = st.Reserve(Bytes(a.x));
    off[i].skip = st.Reserve(Bytes(a.skip));
    off[i].w_raw = st.Reserve(Bytes(a.weight));
    off[i].b_raw = st.Reserve(Bytes(a.bias));
  }
  std::vector<RowSegment> table(segments.size());
  std::vector<RowItem> items;
  int64_t max_block_cols = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const RowNormArgs& a = segments[i];
    if (a.rows == 0 || a.cols == 0) continue;
    if (a.cols <= cuda::kWarpRowMaxCols) {
      for (int64_t r = 0; r < a.rows; r += 8) {
        items.push_back({static_cast<int32_t>(i), 1, r,
                         static_cast<int32_t>(std::min<int64_t>(8, a.rows - r))});
      }
    } else {
      max_block_cols = std::max(max_block_cols, a.cols);
      for (int64_t r = 0; r < a.rows; ++r) items.push_back({static_cast<int32_t>(i), 0, r, 1});
    }
  }
  if (items.empty()) return absl::OkStatus();
  const int64_t table_at = st.Reserve(table.size() * sizeof(RowSegment));
  const int64_t items_at = st.Reserve(items.size() * sizeof(RowItem));
  for (size_t i = 0; i < segments.size(); ++i) {
    off[i].w = st.Reserve(segments[i].weight.present() ? segments[i].cols * 4 : 0);
    off[i].b = st.Reserve(segments[i].bias.present() ? segments[i].cols * 4 : 0);
  }
  const int64_t outputs_at = st.size();
  for (size_t i = 0; i < segments.size(); ++i) {
    off[i].y = st.Reserve(Bytes(segments[i].y));
    off[i].h = st.Reserve(Bytes(segments[i].h));
  }
  absl::StatusOr<Call> call = Begin(st.size());
  if (!call.ok()) return call.status();
  char* dev = call->dev;
  char* host = call->host;
  auto stage = [&](int64_t at, const void* src, int64_t n) {
    if (n > 0) std::memcpy(host + at, src, n);
  };
  for (size_t i = 0; i < segments.size(); ++i) {
    const RowNormArgs& a = segments[i];
    stage(off[i].x, a.x.data, Bytes(a.x));
    stage(off[i].skip, a.skip.data, Bytes(a.skip));
    stage(off[i].w_raw, a.weight.data, Bytes(a.weight));
    stage(off[i].b_raw, a.bias.data, Bytes(a.bias));
    RowSegment& s = table[i];
    s.kind = static_cast<int32_t>(a.kind);
    s.x_dtype = Code(a.x.dtype);
    s.y_dtype = Code(a.y.dtype);
    s.eps_inside = a.eps_placement == EpsPlacement::kInsideSqrt;
    s.cast_before_weight = a.cast_before_weight;
    s.residual = static_cast<int32_t>(a.residual);
    s.rows = a.rows;
    s.cols = a.cols;
    s.partial_m = a.kind == RowNormKind::kRms ? PartialCount(a.partial_fraction, a.cols) : a.cols;
    s.eps = a.eps;
    s.alpha = static_cast<float>(a.alpha);
    s.x = dev + off[i].x;
    s.skip = a.skip.present() ? dev + off[i].skip : nullptr;
    s.weight = a.weight.present() ? reinterpret_cast<const float*>(dev + off[i].w) : nullptr;
    s.bias = a.bias.present() ? reinterpret_cast<const float*>(dev + off[i].b) : nullptr;
    s.y = dev + off[i].y;
    s.h = a.h.present() ? dev + off[i].h : nullptr;
  }
  stage(table_at, table.data(), table.size() * sizeof(RowSegment));
  stage(items_at, items.data(), items.size() * sizeof(RowItem));
  absl::Status status = Check(
      cudaMemcpyAsync(dev, host, outputs_at, cudaMemcpyHostToDevice, call->stream), "copy in");
  for (size_t i = 0; status.ok() && i < segments.size(); ++i) {
    const RowNormArgs& a = segments[i];
    // (offset + weight) is formed in fp32, as on the CPU.
    const float offset = a.kind == RowNormKind::kRms ? static_cast<float>(a.weight_offset) : 0.0f;
    if (a.weight.present()) {
      status = Check(cuda::LaunchWiden(Code(a.weight.dtype), dev + off[i].w_raw, a.cols, offset,
                                       reinterpret_cast<float*>(dev + off[i].w), call->stream),
                     "widen weight");
    }
    if (status.ok() && a.bias.present()) {
      status = Check(cuda::LaunchWiden(Code(a.bias.dtype), dev + off[i].b_raw, a.cols, 0.0f,
                                       reinterpret_cast<float*>(dev + off[i].b), call->stream),
                     "widen bias");
    }
  }
  if (status.ok()) {
    status =
        Check(cuda::LaunchRowNorm(reinterpret_cast<const RowSegment*>(dev + table_at),
                                  reinterpret_cast<const RowItem*>(dev + items_at),
                                  static_cast<int>(items.size()), max_block_cols, call->stream),
              "row kernel");
  }
  if (status.ok()) {
    status = Check(cudaMemcpyAsync(host + outputs_at, dev + outputs_at, st.size() - outputs_at,
                                   cudaMemcpyDeviceToHost, call->stream),
                   "copy out");
  }
  if (status.ok()) status = Check(cudaStreamSynchronize(call->stream), "row norm");
  if (status.ok()) {
    for (size_t i = 0; i < segments.size(); ++i) {
      const RowNormArgs& a = segments[i];
      if (a.y.present()) std::memcpy(a.y.data, host + off[i].y, Bytes(a.y));
      if (a.h.present()) std::memcpy(a.h.data, host + off[i].h, Bytes(a.h));
    }
  } else {
    cudaStreamSynchronize(call->stream);  // nothing may still use the pinned block
  }
  End(*call);
  return status;
}

// Statistics split so that the stats launch has about two blocks per SM.
int Splits(int64_t sets, int64_t set_size, int sms) {
  int64_t splits = std::max<int64_t>(1, (2 * sms + sets - 1) / sets);
  splits = std::min(splits, std::max<int64_t>(1, set_size / 4096));
  return static_cast<int>(std::min<int64_t>(splits, 1024));
}

absl::Status CudaBackend::RunChannel(ChannelArgs ca, const ConstTensor& x,
                                     const ConstTensor& weight, const ConstTensor& bias,
                                     const MutTensor& y, const std::vector<double>* stats_in,
                                     std::vector<double>* stats_out, const char* what) {
  const int64_t sets = ca.groups == 0 ? ca.c : ca.n * ca.groups;
  const int64_t set_size = ca.groups == 0 ? ca.n * ca.s : (ca.c / ca.groups) * ca.s;
  const int splits = stats_in ? 0 : Splits(sets, set_size, sms_);
  // Inputs first (one transfer), then device-only scratch, then y (copied back).
  Staging st;
  const int64_t x_at = st.Reserve(Bytes(x));
  const int64_t w_raw = st.Reserve(Bytes(weight));
  const int64_t b_raw = st.Reserve(Bytes(bias));
  const int64_t stats_at = st.Reserve(sets * 2 * sizeof(double));  // mean[sets], var[sets]
  const int64_t inputs_end = st.size();
  const int64_t w_at = st.Reserve(weight.present() ? ca.c * 4 : 0);
  const int64_t b_at = st.Reserve(bias.present() ? ca.c * 4 : 0);
  const int64_t partials = st.Reserve(sets * splits * 3 * sizeof(double));
  const int64_t y_at = st.Reserve(Bytes(y));
  absl::StatusOr<Call> call = Begin(st.size());
  if (!call.ok()) return call.status();
  char* dev = call->dev;
  char* host = call->host;
  if (Bytes(x) > 0) std::memcpy(host + x_at, x.data, Bytes(x));
  if (weight.present()) std::memcpy(host + w_raw, weight.data, Bytes(weight));
  if (bias.present()) std::memcpy(host + b_raw, bias.data, Bytes(bias));
  if (stats_in) std::memcpy(host + stats_at, stats_in->data(), sets * 2 * sizeof(double));
  ca.x_dtype = Code(x.dtype);
  ca.y_dtype = Code(y.dtype);
  ca.x = dev + x_at;
  ca.y = dev + y_at;
  ca.weight = weight.present() ? reinterpret_cast<const float*>(dev + w_at) : nullptr;
  ca.bias = bias.present() ? reinterpret_cast<const float*>(dev + b_at) : nullptr;
  double* mean = reinterpret_cast<double*>(dev + stats_at);
  double* var = mean + sets;
  absl::Status status = Check(
      cudaMemcpyAsync(dev, host, inputs_end, cudaMemcpyHostToDevice, call->stream), "copy in");
  for (auto [t, raw, at] : {std::tuple{&weight, w_raw, w_at}, std::tuple{&bias, b_raw, b_at}}) {
    if (status.ok() && t->present()) {
      status = Check(cuda::LaunchWiden(Code(t->dtype), dev + raw, ca.c, 0.0f,
                                       reinterpret_cast<float*>(dev + at), call->stream),
                     "widen parameter");
    }
  }
  if (status.ok() && !stats_in) {
    status = Check(cuda::LaunchChannelStats(ca, splits, reinterpret_cast<double*>(dev + partials),
                                            mean, var, call->stream),
                   "statistics");
  }
  if (status.ok()) status = Check(cuda::LaunchChannelApply(ca, mean, var, call->stream), what);
  if (status.ok()) {
    status = Check(
        cudaMemcpyAsync(host + y_at, dev + y_at, Bytes(y), cudaMemcpyDeviceToHost, call->stream),
        "copy out");
  }
  if (status.ok() && stats_out) {
    status = Check(cudaMemcpyAsync(host + stats_at, dev + stats_at, sets * 2 * sizeof(double),
                                   cudaMemcpyDeviceToHost, call->stream),
                   "copy out statistics");
  }
  if (status.ok()) status = Check(cudaStreamSynchronize(call->stream), what);
  if (status.ok()) {
    if (Bytes(y) > 0) std::memcpy(y.data, host + y_at, Bytes(y));
    if (stats_out) {
      const double* m = reinterpret_cast<const double*>(host + stats_at);
      stats_out->assign(m, m + sets * 2);
    }
  } else {
    cudaStreamSynchronize(call->stream);  // nothing may still use the pinned block
  }
  End(*call);
  return status;
}

absl::Status CudaBackend::BatchNorm(const BatchNormArgs& a) {
  if (a.n * a.c * a.s == 0 && !a.training) return absl::OkStatus();
  ChannelArgs ca;
  ca.n = a.n;
  ca.c = a.c;
  ca.s = a.s;
  ca.groups = 0;
  ca.channels_last = a.layout == Layout::kChannelsLast;
  ca.eps = a.eps;
  std::vector<double> stats(a.c * 2);  // mean[c], var[c]
  if (!a.training) {
    for (int64_t c = 0; c < a.c; ++c) {
      stats[c] = a.running_mean.at(c);
      stats[a.c + c] = a.running_var.at(c);
    }
    return RunChannel(ca, a.x, a.weight, a.bias, a.y, &stats, nullptr, "batch norm");
  }
  if (absl::Status s = RunChannel(ca, a.x, a.weight, a.bias, a.y, nullptr, &stats, "batch norm");
      !s.ok()) {
    return s;
  }
  const double* m = stats.data();
  const double* v = m + a.c;
  const double count = static_cast<double>(a.n * a.s);
  for (int64_t c = 0; c < a.c; ++c) {
    if (a.batch_mean.present()) a.batch_mean.set(c, static_cast<float>(m[c]));
    if (a.batch_var.present()) a.batch_var.set(c, static_cast<float>(v[c]));
    if (a.running_mean_out.present()) {
      a.running_mean_out.set(
          c, static_cast<float>((1 - a.momentum) * a.running_mean.at(c) + a.momentum * m[c]));
    }
    if (a.running_var_out.present()) {
      a.running_var_out.set(c, static_cast<float>((1 - a.momentum) * a.running_var.at(c) +
                                                  a.momentum * v[c] * count / (count - 1)));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::GroupNorm(const GroupNormArgs& a) {
  if (a.n * a.c * a.s == 0) return absl::OkStatus();
  ChannelArgs ca;
  ca.n = a.n;
  ca.c = a.c;
  ca.s = a.s;
  ca.groups = a.groups;
  ca.channels_last = a.layout == Layout::kChannelsLast;
  ca.eps = a.eps;
  return RunChannel(ca, a.x, a.weight, a.bias, a.y, nullptr, nullptr, "group norm");
}

}  // namespace

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
  return std::unique_ptr<Backend>(new CudaBackend(
      options.device, options.streams, std::move(description), prop.multiProcessorCount));
}

}  // namespace normd::kernels
