// The NormService gRPC handlers: decode and validate (request_builder), run through the
// Scheduler, fill timing and backend, and map errors once at this edge.
//
// Thread safety: handlers run concurrently on gRPC's threads; the service holds only
// immutable configuration and the (thread-safe) Scheduler.
#ifndef NORMD_SERVER_NORM_SERVICE_H_
#define NORMD_SERVER_NORM_SERVICE_H_

#include "normd/v1/normd.grpc.pb.h"
#include "server/scheduling/scheduler.h"
#include "server/tensor_checks.h"

namespace normd::server {

struct ServiceOptions {
  Limits limits;
  int64_t max_message_bytes = 0;
};

class NormServiceImpl final : public v1::NormService::Service {
 public:
  NormServiceImpl(Scheduler* scheduler, ServiceOptions options)
      : scheduler_(scheduler), options_(options) {}

  grpc::Status Normalize(grpc::ServerContext* context, const v1::NormalizeRequest* request,
                         v1::NormalizeResponse* response) override;
  grpc::Status NormalizeStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::NormalizeResponse, v1::NormalizeRequest>* stream) override;
  grpc::Status GetServerInfo(grpc::ServerContext* context, const v1::ServerInfoRequest* request,
                             v1::ServerInfo* response) override;
  grpc::Status GetDeepNormCoefficients(grpc::ServerContext* context,
                                       const v1::DeepNormRequest* request,
                                       v1::DeepNormCoefficients* response) override;

 private:
  // Validates and runs one request; on error the response holds only the id.
  absl::Status Handle(const v1::NormalizeRequest& request, v1::NormalizeResponse* response);

  Scheduler* scheduler_;
  ServiceOptions options_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_NORM_SERVICE_H_
