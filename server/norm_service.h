// The NormService gRPC handlers on gRPC's callback API: no gRPC thread waits on compute.
// Normalize and NormalizeStream validate a request into a Work (call_env.h) and hand it
// to the Scheduler, whose completion answers the call; Echo/EchoStream answer from the
// handler without compute; GetServerInfo and GetDeepNormCoefficients answer at once.
// absl::Status becomes a gRPC status in one place (status_map.h).
//
// Thread safety: handlers run concurrently on gRPC's threads; the service holds only
// immutable configuration and the (thread-safe) Scheduler.
#ifndef NORMD_SERVER_NORM_SERVICE_H_
#define NORMD_SERVER_NORM_SERVICE_H_

#include "normd/v1/normd.grpc.pb.h"
#include "server/call_env.h"

namespace normd::server {

class NormServiceImpl final : public v1::NormService::CallbackService {
 public:
  NormServiceImpl(Scheduler* scheduler, ServiceOptions options) : env_{scheduler, options} {}

  grpc::ServerUnaryReactor* Normalize(grpc::CallbackServerContext* context,
                                      const v1::NormalizeRequest* request,
                                      v1::NormalizeResponse* response) override;
  grpc::ServerBidiReactor<v1::NormalizeRequest, v1::NormalizeResponse>* NormalizeStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const v1::NormalizeRequest* request,
                                 v1::NormalizeResponse* response) override;
  grpc::ServerBidiReactor<v1::NormalizeRequest, v1::NormalizeResponse>* EchoStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::ServerInfoRequest* request,
                                          v1::ServerInfo* response) override;
  grpc::ServerUnaryReactor* GetDeepNormCoefficients(grpc::CallbackServerContext* context,
                                                    const v1::DeepNormRequest* request,
                                                    v1::DeepNormCoefficients* response) override;

 private:
  static absl::Status DeepNorm(const v1::DeepNormRequest* request,
                               v1::DeepNormCoefficients* response);

  CallEnv env_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_NORM_SERVICE_H_
