#include "server/request_log.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/logging.h"
#include "server/tensor_checks.h"

namespace normd::server {
namespace {

using metrics::Op;

Op OpOf(const v1::NormalizeRequest& r, bool echo) {
  if (echo) return Op::kEcho;
  switch (r.op_case()) {
    case v1::NormalizeRequest::kLayerNorm:
      return Op::kLayerNorm;
    case v1::NormalizeRequest::kRmsNorm:
      return Op::kRmsNorm;
    case v1::NormalizeRequest::kL2Norm:
      return Op::kL2Norm;
    case v1::NormalizeRequest::kBatchNorm:
      return Op::kBatchNorm;
    case v1::NormalizeRequest::kGroupNorm:
      return Op::kGroupNorm;
    case v1::NormalizeRequest::kInstanceNorm:
      return Op::kInstanceNorm;
    case v1::NormalizeRequest::kQkNorm:
      return Op::kQkNorm;
    case v1::NormalizeRequest::OP_NOT_SET:
      break;
  }
  return Op::kOther;
}

// The request's main tensor: the input, or q for QK-norm.
const v1::Tensor& MainTensor(const v1::NormalizeRequest& r) {
  return r.op_case() == v1::NormalizeRequest::kQkNorm ? r.qk_norm().q() : r.input();
}

metrics::DType DTypeOf(const v1::Tensor& t) {
  switch (t.dtype()) {
    case v1::DATA_TYPE_F32:
      return metrics::DType::kF32;
    case v1::DATA_TYPE_F16:
      return metrics::DType::kF16;
    case v1::DATA_TYPE_BF16:
      return metrics::DType::kBF16;
    default:
      return metrics::DType::kOther;
  }
}

std::optional<metrics::Rejection> RejectionOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return metrics::Rejection::kInvalidArgument;
    case absl::StatusCode::kUnavailable:
      return metrics::Rejection::kQueueFull;
    case absl::StatusCode::kFailedPrecondition:
      return metrics::Rejection::kNoBackend;
    case absl::StatusCode::kUnauthenticated:
      return metrics::Rejection::kUnauthenticated;
    default:
      return std::nullopt;
  }
}

}  // namespace

void RecordAnswer(metrics::Metrics* metrics, const Answer& a,
                  const std::function<std::string()>& peer) {
  const v1::NormalizeRequest& request = *a.request;
  metrics::RequestRecord r;
  r.op = OpOf(request, a.echo);
  const v1::Tensor& main = MainTensor(request);
  r.dtype = DTypeOf(main);
  r.code = a.status.code();
  r.latency = absl::Now() - a.start;
  if (a.result != nullptr) {
    r.backend = a.result->backend == kernels::BackendKind::kCuda ? metrics::Backend::kCuda
                                                                 : metrics::Backend::kCpu;
    r.queue = a.result->queue;
    r.compute = a.result->compute;
    r.batch_requests = a.result->batch_requests;
  }
  r.received_bytes = static_cast<int64_t>(request.ByteSizeLong());
  r.sent_bytes =
      a.response != nullptr ? static_cast<int64_t>(a.response->ByteSizeLong()) : int64_t{0};
  if (metrics != nullptr) {
    metrics->Record(r);
    // Refused before compute: no backend result.
    if (a.result == nullptr && !a.status.ok()) {
      if (const auto why = RejectionOf(r.code)) metrics->RecordRejection(*why);
    }
  }
  if (!AccessLogEnabled()) return;
  LogAccess({{"id", request.id()},
             {"op", metrics::Name(r.op)},
             {"dtype", metrics::Name(r.dtype)},
             {"shape", ShapeString(absl::MakeConstSpan(main.shape().data(), main.shape().size()))},
             {"received_bytes", absl::StrCat(r.received_bytes)},
             {"sent_bytes", absl::StrCat(r.sent_bytes)},
             {"backend", metrics::Name(r.backend)},
             {"code", absl::StatusCodeToString(r.code)},
             {"latency_us", absl::StrCat(absl::ToInt64Microseconds(r.latency))},
             {"peer", peer()}});
}

}  // namespace normd::server
