#include "server/request_builder.h"

#include "normd/common/status_macros.h"
#include "server/field_error.h"
#include "server/shared_memory.h"
#include "server/wire_enums.h"

namespace normd::server {

absl::StatusOr<Job> BuildJob(const v1::NormalizeRequest& request, const Limits& request_limits,
                             v1::NormalizeResponse* response, SharedMemoryAccess* shared_memory) {
  Job job;
  Limits limits = request_limits;
  limits.shared_memory = shared_memory;
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
  // Output references the op has no output for.
  if (request.has_k_output_shared_memory() && request.op_case() != v1::NormalizeRequest::kQkNorm) {
    return InvalidField("k_output_shared_memory", "expected unset: only qk_norm has a k_output");
  }
  if (request.has_residual_sum_shared_memory() && !response->has_residual_sum()) {
    return InvalidField("residual_sum_shared_memory",
                        "expected unset: the request asks for no residual_sum");
  }
  if (shared_memory != nullptr) {
    const bool row_op = job.family == Job::Family::kRowNorm || job.family == Job::Family::kQkNorm;
    NORMD_RETURN_IF_ERROR(shared_memory->CheckOverlaps(row_op));
  }
  return job;
}

}  // namespace normd::server
