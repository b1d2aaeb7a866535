#include "server/request_builder.h"

#include "server/field_error.h"
#include "server/wire_enums.h"

namespace normd::server {

absl::StatusOr<Job> BuildJob(const v1::NormalizeRequest& request, const Limits& limits,
                             v1::NormalizeResponse* response) {
  Job job;
  absl::StatusOr<BackendPreference> preference = ToBackendPreference(request.backend(), "backend");
  if (!preference.ok()) return preference.status();
  job.preference = *preference;
  BuildContext ctx{request, limits, response, std::nullopt};
  if (request.output_dtype() != v1::DATA_TYPE_UNSPECIFIED) {
    absl::StatusOr<kernels::DType> out = KernelDType(request.output_dtype(), "output_dtype");
    if (!out.ok()) return out.status();
    ctx.output_dtype = *out;
  }
  if (request.op_case() != v1::NormalizeRequest::kQkNorm && !request.has_input()) {
    return InvalidField("input", "required, got no tensor");
  }
  absl::Status status;
  switch (request.op_case()) {
    case v1::NormalizeRequest::kLayerNorm:
      status = BuildLayerNorm(ctx, &job);
      break;
    case v1::NormalizeRequest::kRmsNorm:
      status = BuildRmsNorm(ctx, &job);
      break;
    case v1::NormalizeRequest::kL2Norm:
      status = BuildL2Norm(ctx, &job);
      break;
    case v1::NormalizeRequest::kQkNorm:
      status = BuildQkNorm(ctx, &job);
      break;
    case v1::NormalizeRequest::kBatchNorm:
      status = BuildBatchNorm(ctx, &job);
      break;
    case v1::NormalizeRequest::kGroupNorm:
      status = BuildGroupNorm(ctx, &job);
      break;
    case v1::NormalizeRequest::kInstanceNorm:
      status = BuildInstanceNorm(ctx, &job);
      break;
    case v1::NormalizeRequest::OP_NOT_SET:
      return InvalidField("op",
                          "expected one of layer_norm, rms_norm, l2_norm, batch_norm, "
                          "group_norm, instance_norm, qk_norm, got none");
  }
  if (!status.ok()) return status;
  return job;
}

}  // namespace normd::server
