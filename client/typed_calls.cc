// The typed op calls of Client (client.h): each op's request built by MakeRequest
// (requests.h), sent blocking, with a future or with a callback; and a response turned into
// a NormResult.
#include <future>
#include <memory>

#include "normd/client.h"

namespace normd {

namespace {
// A wire tensor as a HostTensor, its bytes moved out of `t`.
HostTensor Take(v1::Tensor* t) {
  std::string bytes = std::move(*t->mutable_data());
  HostTensor out = FromWire(*t);  // dtype and shape; the bytes were moved out
  out.bytes = std::move(bytes);
  return out;
}
}  // namespace

NormResult ToNormResult(v1::NormalizeResponse&& r) {
  NormResult out;
  out.output = Take(r.mutable_output());
  if (r.has_k_output()) out.k_output = Take(r.mutable_k_output());
  if (r.has_residual_sum()) out.residual_sum = Take(r.mutable_residual_sum());
  if (r.has_batch_mean()) out.batch_mean = Take(r.mutable_batch_mean());
  if (r.has_batch_var()) out.batch_var = Take(r.mutable_batch_var());
  if (r.has_running_mean()) out.running_mean = Take(r.mutable_running_mean());
  if (r.has_running_var()) out.running_var = Take(r.mutable_running_var());
  out.backend = r.backend() == v1::BACKEND_CUDA ? Backend::kCuda : Backend::kCpu;
  out.queue_us = r.timing().queue_us();
  out.batch_requests = r.timing().batch_requests();
  out.compute_us = r.timing().compute_us();
  out.total_us = r.timing().total_us();
  return out;
}

// A copy, then moved: each tensor's bytes are copied once.
NormResult ToNormResult(const v1::NormalizeResponse& r) {
  return ToNormResult(v1::NormalizeResponse(r));
}

absl::StatusOr<NormResult> Client::Call(const v1::NormalizeRequest& request, const CallOptions& c) {
  absl::StatusOr<v1::NormalizeResponse> r = Normalize(request, c);
  if (!r.ok()) return r.status();
  return ToNormResult(*std::move(r));
}

CallHandle Client::CallAsync(v1::NormalizeRequest request, ResultCallback done,
                             const CallOptions& c) {
  return StartAsync(
      false, std::move(request),
      [done = std::move(done)](absl::StatusOr<v1::NormalizeResponse> r, const CallInfo&) {
        done(r.ok() ? absl::StatusOr<NormResult>(ToNormResult(*std::move(r))) : r.status());
      },
      c);
}

PendingResult Client::CallAsync(v1::NormalizeRequest request, const CallOptions& c) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<NormResult>>>();
  std::future<absl::StatusOr<NormResult>> future = promise->get_future();
  CallHandle handle = CallAsync(
      std::move(request),
      [promise](absl::StatusOr<NormResult> r) { promise->set_value(std::move(r)); }, c);
  return PendingResult(std::move(future), std::move(handle));
}

// The typed calls: the request MakeRequest builds, sent blocking, with a callback or
// with a future.
#define NORMD_TYPED_CALLS(Name, Options)                                                           \
  absl::StatusOr<NormResult> Client::Name(const HostTensor& x, const Options& o,                   \
                                          const CallOptions& c) {                                  \
    return Call(MakeRequest(x, o), c);                                                             \
  }                                                                                                \
  CallHandle Client::Name##Async(const HostTensor& x, const Options& o, ResultCallback done,       \
                                 const CallOptions& c) {                                           \
    return CallAsync(MakeRequest(x, o), std::move(done), c);                                       \
  }                                                                                                \
  PendingResult Client::Name##Async(const HostTensor& x, const Options& o, const CallOptions& c) { \
    return CallAsync(MakeRequest(x, o), c);                                                        \
  }
NORMD_TYPED_CALLS(LayerNorm, LayerNormOptions)
NORMD_TYPED_CALLS(RmsNorm, RmsNormOptions)
NORMD_TYPED_CALLS(L2Norm, L2NormOptions)
NORMD_TYPED_CALLS(BatchNorm, BatchNormOptions)
NORMD_TYPED_CALLS(GroupNorm, GroupNormOptions)
NORMD_TYPED_CALLS(InstanceNorm, InstanceNormOptions)
#undef NORMD_TYPED_CALLS

absl::StatusOr<NormResult> Client::QkNorm(const HostTensor& q, const HostTensor& k,
                                          const QkNormOptions& o, const CallOptions& c) {
  return Call(MakeRequest(q, k, o), c);
}

CallHandle Client::QkNormAsync(const HostTensor& q, const HostTensor& k, const QkNormOptions& o,
                               ResultCallback done, const CallOptions& c) {
  return CallAsync(MakeRequest(q, k, o), std::move(done), c);
}

PendingResult Client::QkNormAsync(const HostTensor& q, const HostTensor& k, const QkNormOptions& o,
                                  const CallOptions& c) {
  return CallAsync(MakeRequest(q, k, o), c);
}

}  // namespace normd
