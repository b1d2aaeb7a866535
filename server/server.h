// Assembles a running normd: backends, scheduler, NormService on gRPC's completion-queue
// API with its transport threads (one queue each), health and reflection. Used by main
// and by the integration tests (which listen on port 0).
//
// Why completion queues and not the callback API: on the 2-core VM, a single transport
// thread answered Echo with half the server CPU per call of gRPC 1.51's callback server
// at moderate load, at the same maximum throughput (BENCHMARKS.md, "Transport threads").
//
// Thread safety: Start() once; Wait()/Shutdown() may be called from any thread.
#ifndef NORMD_SERVER_SERVER_H_
#define NORMD_SERVER_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/auth.h"
#include "server/calls.h"
#include "server/health_service.h"
#include "server/live_calls.h"
#include "server/log_summary.h"
#include "server/memory_budget.h"
#include "server/memory_trim.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/tls.h"

namespace normd::server {

struct ServerOptions {
  std::string listen = "0.0.0.0:50051";
  int64_t max_message_bytes = 256 << 20;
  int cpu_threads = 0;  // CPU backend worker pool size; 0: every core
  SchedulerOptions scheduler;
  int stream_window = 64;  // requests of one stream in flight at once
  // Threads polling gRPC's completion queues (each has its own queue); 0: a quarter of
  // the cores, at least one.
  int transport_threads = 0;
  bool enable_cuda = true;         // use a CUDA device when one is present
  bool enable_diagnostics = true;  // serve normd.v1.DiagnosticsService (Echo, EchoStream)
  // The shared-memory data plane (RegisterSharedMemory, SharedMemoryRef); false: those
  // calls are UNIMPLEMENTED and references INVALID_ARGUMENT.
  bool enable_shared_memory = true;
  // Tests only: the backends to serve with instead of the machine's.
  std::vector<std::shared_ptr<kernels::Backend>> backends;
  // The memory budget (memory_budget.h), in bytes; 0: DefaultMemoryBudget(). Half goes to
  // gRPC's ResourceQuota (messages being received), half to requests handed over (parsed
  // requests, outputs, responses until sent).
  int64_t max_memory = 0;
  // How long Shutdown lets accepted calls finish before cancelling them.
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // HOST:PORT of the Prometheus /metrics endpoint; empty: none (metrics are recorded
  // anyway, for the log summary).
  std::string metrics_listen;
  // How often a summary line is logged at info; zero: never.
  absl::Duration log_summary_interval = absl::ZeroDuration();
  // Plaintext, TLS or mutual TLS (tls.h).
  TlsOptions tls;
  // Bearer tokens normd's services require, one a line; empty: none required (auth.h).
  std::string auth_token_file;
  // How often the certificate, key, CA and token files are checked for changes.
  absl::Duration reload_interval = absl::Seconds(10);
  // Connection hygiene (gRPC channel arguments); a zero duration leaves gRPC's default
  // (unlimited) where noted.
  struct Connections {
    // Per connection. Each open stream may hold up to its flow-control window of message
    // bytes inside gRPC before normd reads it, outside normd's budget and beyond what
    // gRPC's quota holds back: 1024 streams of 1 MiB requests took normd to 1135 MiB with
    // --max-memory 1GiB (bench/overload_bench.py), 128 to 565 MiB, at the same goodput.
    // Further calls wait in the client, which is where an overload should wait.
    int max_concurrent_streams = 128;
    absl::Duration keepalive_time = absl::Hours(2);  // server pings an idle connection
    absl::Duration keepalive_timeout = absl::Seconds(20);
    // Clients may ping at most this often; more often: GOAWAY (too_many_pings).
    absl::Duration min_ping_interval = absl::Seconds(10);
    bool permit_pings_without_calls = true;
    absl::Duration max_connection_age;        // zero: unlimited
    absl::Duration max_connection_age_grace;  // zero: unlimited
    absl::Duration max_connection_idle;       // zero: unlimited
    // More of gRPC's integer channel arguments (name, value), set last: what
    // --grpc-args names, for transport tuning and its A/B measurements.
    std::vector<std::pair<std::string, int>> grpc_args;
  } connections;
};

class NormServer {
 public:
  static absl::StatusOr<std::unique_ptr<NormServer>> Start(const ServerOptions& options);
  ~NormServer();

  int port() const { return port_; }
  int metrics_port() const { return metrics_endpoint_ ? metrics_endpoint_->port() : 0; }
  // The /metrics text as a scrape would read it now.
  std::string MetricsText() const;
  SchedulerStats scheduler_stats() const { return scheduler_->stats(); }
  const MemoryBudget& memory_budget() const { return *memory_; }
  void Wait() { server_->Wait(); }
  // Health NOT_SERVING for "" and every service, at once; calls are still accepted and
  // served (the drain delay: balancers and probes notice first). Idempotent.
  void BeginDrain();
  // BeginDrain, stop accepting calls, let the accepted ones finish (cancelling those still
  // running after shutdown_timeout), then stop the scheduler. Idempotent.
  void Shutdown();

 private:
  NormServer() = default;

  // Declared so that the server goes before its queues and services, and those before
  // the scheduler and env the calls use.
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<TokenAuthenticator> auth_;
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;  // null when off
  std::unique_ptr<MemoryBudget> memory_;
  std::unique_ptr<MemoryTrimmer> trimmer_;
  LiveCalls live_calls_;  // the call objects on the queues (live_calls.h)
  CallEnv env_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  AsyncService service_;
  DiagnosticsAsyncService diagnostics_;
  bool diagnostics_enabled_ = true;
  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> transport_;  // one per queue; joined by Shutdown
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<LogSummary> log_summary_;
  int port_ = 0;
  absl::Duration shutdown_timeout_;
  std::string cuda_absent_reason_ = "not probed";
  bool shut_down_ = false;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_SERVER_H_
