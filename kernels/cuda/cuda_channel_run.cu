// CudaBackend::BatchNorm and GroupNorm (InstanceNorm arrives as GroupNorm): statistics per
// channel or group, split across blocks and merged deterministically, then one apply pass.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_backend_impl.h"

namespace normd::kernels::cuda {

absl::Status CudaBackend::RunChannel(ChannelArgs ca, const ConstTensor& x,
                                     const ConstTensor& weight, const ConstTensor& bias,
                                     const MutTensor& y, const std::vector<double>* stats_in,
                                     std::vector<double>* stats_out, const char* what) {
  const int64_t sets = ca.groups == 0 ? ca.c : ca.n * ca.groups;
  const int splits = stats_in ? 0 : ChannelStatsSplits(ca, sms_);
  // Inputs first (one transfer), then device-only scratch, then y (copied back).
  Staging st;
  const int64_t x_at = st.Reserve(Bytes(x));
  const int64_t w_at = st.Reserve(Bytes(weight));
  const int64_t b_at = st.Reserve(Bytes(bias));
  const int64_t stats_at = st.Reserve(sets * 2 * sizeof(double));  // mean[sets], var[sets]
  const int64_t inputs_end = st.size();
  const int64_t partials = st.Reserve(sets * splits * 3 * sizeof(double));
  const int64_t params_at = st.Reserve(ChannelParamCount(ca) * sizeof(float4));
  const int64_t y_at = st.Reserve(Bytes(y));
  absl::StatusOr<Call> call = Begin(st.size());
  if (!call.ok()) return call.status();
  char* dev = call->dev;
  char* host = call->host;
  if (Bytes(x) > 0) std::memcpy(host + x_at, x.data, Bytes(x));
  if (weight.present()) std::memcpy(host + w_at, weight.data, Bytes(weight));
  if (bias.present()) std::memcpy(host + b_at, bias.data, Bytes(bias));
  if (stats_in) std::memcpy(host + stats_at, stats_in->data(), sets * 2 * sizeof(double));
  ca.x_dtype = Code(x.dtype);
  ca.y_dtype = Code(y.dtype);
  ca.x = dev + x_at;
  ca.y = dev + y_at;
  ca.weight = weight.present() ? dev + w_at : nullptr;
  ca.bias = bias.present() ? dev + b_at : nullptr;
  double* mean = reinterpret_cast<double*>(dev + stats_at);
  double* var = mean + sets;
  absl::Status status = Check(
      cudaMemcpyAsync(dev, host, inputs_end, cudaMemcpyHostToDevice, call->stream), "copy in");
  auto* params = reinterpret_cast<float4*>(dev + params_at);
  if (status.ok()) {
    status = stats_in
                 ? Check(LaunchChannelParams(ca, mean, var, params, call->stream), what)
                 : Check(LaunchChannelStats(ca, splits, reinterpret_cast<double*>(dev + partials),
                                            mean, var, params, call->stream),
                         "statistics");
  }
  if (status.ok()) status = Check(LaunchChannelApply(ca, params, call->stream), what);
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
  const ChannelArgs ca = ChannelArgsOf(a);
  if (!a.training) {
    const std::vector<double> stats = RunningStats(a);
    return RunChannel(ca, a.x, a.weight, a.bias, a.y, &stats, nullptr, "batch norm");
  }
  std::vector<double> stats(a.c * 2);  // mean[c], var[c]
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
  return RunChannel(ChannelArgsOf(a), a.x, a.weight, a.bias, a.y, nullptr, nullptr, "group norm");
}

}  // namespace normd::kernels::cuda
