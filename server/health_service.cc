#include "server/health_service.h"

#include "absl/time/clock.h"

namespace normd::server {

using grpc::health::v1::HealthCheckResponse;

void HealthService::SetServing(const std::string& service, bool serving) {
  absl::MutexLock l(&mu_);
  serving_[service] = serving && !shut_down_;
  ++version_;
}

void HealthService::Shutdown() {
  absl::MutexLock l(&mu_);
  shut_down_ = true;
  for (auto& [name, serving] : serving_) serving = false;
  ++version_;
}

HealthService::Status HealthService::Lookup(const std::string& service) const {
  auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  absl::MutexLock l(&mu_);
  const Status s = Lookup(request->service());
  if (s == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "service: unknown service name \"" + request->service() + "\"");
  }
  response->set_status(s);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  int64_t seen = -1;
  Status last = HealthCheckResponse::UNKNOWN;
  for (;;) {
    Status now;
    bool done;
    {
      absl::MutexLock l(&mu_);
      // Wakes on a change, and every 200 ms to notice a client that went away (the sync
      // API has no cancel callback).
      struct Changed {
        const int64_t* version;
        int64_t seen;
        static bool Eval(Changed* c) { return *c->version != c->seen; }
      } changed{&version_, seen};
      mu_.AwaitWithTimeout(absl::Condition(&Changed::Eval, &changed), absl::Milliseconds(200));
      seen = version_;
      now = Lookup(request->service());
      done = shut_down_;
    }
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
    if (now != last) {
      HealthCheckResponse r;
      r.set_status(now);
      if (!writer->Write(r)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
      last = now;
    }
    if (done) return grpc::Status::OK;
  }
}

}  // namespace normd::server
