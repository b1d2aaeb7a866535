// Assembles a running normd: backends, scheduler, NormService, gRPC health and reflection.
// Used by main and by the integration tests (which listen on port 0).
//
// Thread safety: Start() once; Wait()/Shutdown() may be called from any thread.
#ifndef NORMD_SERVER_SERVER_H_
#define NORMD_SERVER_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/norm_service.h"

namespace normd::server {

struct ServerOptions {
  std::string listen = "0.0.0.0:50051";
  int64_t max_message_bytes = 256 << 20;
  int cpu_threads = 0;  // CPU backend worker pool size; 0: every core
  SchedulerOptions scheduler;
  int stream_window = 64;   // requests of one stream in flight at once
  bool enable_cuda = true;  // use a CUDA device when one is present
  // Tests only: the backends to serve with instead of the machine's.
  std::vector<std::shared_ptr<kernels::Backend>> backends;
  // How long Shutdown lets calls in flight finish before cancelling them.
  absl::Duration drain_timeout = absl::Seconds(5);
};

class NormServer {
 public:
  static absl::StatusOr<std::unique_ptr<NormServer>> Start(const ServerOptions& options);
  ~NormServer();

  int port() const { return port_; }
  SchedulerStats scheduler_stats() const { return scheduler_->stats(); }
  void Wait() { server_->Wait(); }
  // Health NOT_SERVING, stop accepting calls, let the calls in flight finish (cancelling
  // those still running after drain_timeout), then stop the scheduler. Idempotent.
  void Shutdown();

 private:
  NormServer() = default;

  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<NormServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Duration drain_timeout_;
  std::string cuda_absent_reason_ = "not probed";
  bool shut_down_ = false;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_SERVER_H_
