// grpc.health.v1.Health (Check and Watch) for normd's services, on gRPC's synchronous API.
//
// Why not gRPC's own DefaultHealthCheckService: in gRPC 1.51 it is a callback-API
// service, and any callback-API service makes gRPC start two "nexting" threads that poll
// the same sockets as normd's completion-queue threads; every request then crosses
// threads. On the 2-core VM that cost 30 us of server CPU per 16 KiB Echo at 9000
// calls/s (BENCHMARKS.md, "Transport threads"). A synchronous service adds one polling
// thread that measurably costs nothing.
//
// Status per service name ("" is the whole server); unknown names answer NOT_FOUND from
// Check and SERVICE_UNKNOWN from Watch, as the protocol says. Watch sends the current
// status, then each change, until the client leaves or Shutdown; each open Watch holds
// one of gRPC's synchronous-server threads and notices a client that left within 200 ms.
//
// Thread safety: all methods may be called from any thread.
#ifndef NORMD_SERVER_HEALTH_SERVICE_H_
#define NORMD_SERVER_HEALTH_SERVICE_H_

#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace normd::server {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  void SetServing(const std::string& service, bool serving);
  // Every service NOT_SERVING, from now on; open watches get that and end.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;
  Status Lookup(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every change, for Watch
};

}  // namespace normd::server

#endif  // NORMD_SERVER_HEALTH_SERVICE_H_
