// What GetServerInfo and GetDeepNormCoefficients answer (the calls themselves are in
// unary_calls.cc).
//
// Thread safety: stateless; safe from any thread.
#ifndef NORMD_SERVER_NORM_SERVICE_H_
#define NORMD_SERVER_NORM_SERVICE_H_

#include "absl/status/status.h"
#include "normd/v1/normd.pb.h"
#include "server/call_env.h"

namespace normd::server {

// Version, ops, dtypes, backends (CUDA listed as unavailable, with the reason, when
// absent) and the transport limits.
void FillServerInfo(const CallEnv& env, v1::GetServerInfoResponse* info);

// DeepNorm's alpha and beta for the request's architecture and depths.
absl::Status ComputeDeepNorm(const v1::GetDeepNormCoefficientsRequest& request,
                             v1::GetDeepNormCoefficientsResponse* response);

}  // namespace normd::server

#endif  // NORMD_SERVER_NORM_SERVICE_H_
