// Transport -> scheduling: validates a NormalizeRequest completely before any compute and
// turns it into a Job whose kernel arguments point into the request's tensor bytes and
// into output tensors allocated (and shaped) in the response. No tensor data is copied.
//
// Errors: INVALID_ARGUMENT naming the field with expected and actual values;
// UNIMPLEMENTED for an option value or combination the server does not offer.
// Stateless; safe from any thread. The Job is valid while `request` and `response` live
// and their tensor fields are not modified.
#ifndef NORMD_SERVER_REQUEST_BUILDER_H_
#define NORMD_SERVER_REQUEST_BUILDER_H_

#include <optional>

#include "absl/status/statusor.h"
#include "normd/scheduling/job.h"
#include "normd/v1/normd.pb.h"
#include "server/tensor_checks.h"

namespace normd::server {

// `shared_memory`: resolves the request's shared-memory references and holds their
// regions; null: references are INVALID_ARGUMENT.
absl::StatusOr<Job> BuildJob(const v1::NormalizeRequest& request, const Limits& limits,
                             v1::NormalizeResponse* response,
                             SharedMemoryAccess* shared_memory = nullptr);

// Per-family builders, called by BuildJob once the common fields are checked.
struct BuildContext {
  const v1::NormalizeRequest& request;
  const Limits& limits;
  v1::NormalizeResponse* response;
  std::optional<kernels::DType> output_dtype;  // unset: each output takes its input's dtype
};
absl::Status BuildLayerNorm(const BuildContext& ctx, Job* job);
absl::Status BuildRmsNorm(const BuildContext& ctx, Job* job);
absl::Status BuildL2Norm(const BuildContext& ctx, Job* job);
absl::Status BuildQkNorm(const BuildContext& ctx, Job* job);
absl::Status BuildBatchNorm(const BuildContext& ctx, Job* job);
absl::Status BuildGroupNorm(const BuildContext& ctx, Job* job);
absl::Status BuildInstanceNorm(const BuildContext& ctx, Job* job);

}  // namespace normd::server

#endif  // NORMD_SERVER_REQUEST_BUILDER_H_
