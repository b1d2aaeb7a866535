#include "server/server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/kernels/cuda_backend.h"
#include "server/cq_event.h"
#include "spdlog/spdlog.h"

namespace normd::server {
namespace {

// How long Shutdown waits, once the server and the scheduler have stopped, for the call
// objects to see their last events (milliseconds, normally).
constexpr absl::Duration kCallsGoneTimeout = absl::Seconds(10);

int Millis(absl::Duration d) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
}

void SetConnectionArguments(const ServerOptions::Connections& c, grpc::ServerBuilder* b) {
  b->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, c.max_concurrent_streams);
  b->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(c.keepalive_time));
  b->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(c.keepalive_timeout));
  b->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                        Millis(c.min_ping_interval));
  b->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                        c.permit_pings_without_calls ? 1 : 0);
  for (const auto& [arg, d] :
       {std::pair{GRPC_ARG_MAX_CONNECTION_AGE_MS, c.max_connection_age},
        std::pair{GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, c.max_connection_age_grace},
        std::pair{GRPC_ARG_MAX_CONNECTION_IDLE_MS, c.max_connection_idle}}) {
    if (d > absl::ZeroDuration()) b->AddChannelArgument(arg, Millis(d));
  }
  for (const auto& [name, value] : c.grpc_args) b->AddChannelArgument(name, value);
}

}  // namespace

absl::StatusOr<std::unique_ptr<NormServer>> NormServer::Start(const ServerOptions& options) {
  if (options.max_message_bytes <= 0 || options.max_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("max_message_bytes: expected 1 to ", INT32_MAX,
                                                   ", got ", options.max_message_bytes));
  }
  std::unique_ptr<NormServer> s(new NormServer());
  std::vector<std::shared_ptr<kernels::Backend>> backends = options.backends;
  if (backends.empty()) {
    kernels::CpuBackendOptions cpu_options;
    cpu_options.threads = options.cpu_threads;
    backends.push_back(std::make_shared<kernels::CpuBackend>(cpu_options));
    if (options.enable_cuda) {
      absl::StatusOr<std::unique_ptr<kernels::Backend>> cuda = kernels::MakeCudaBackend();
      if (cuda.ok()) {
        backends.push_back(std::move(*cuda));
      } else {
        spdlog::info("CUDA backend absent: {}", std::string(cuda.status().message()));
        s->cuda_absent_reason_ = std::string(cuda.status().message());
      }
    }
  }
  SchedulerOptions scheduler_options = options.scheduler;
  scheduler_options.on_backend_error = [](absl::string_view lane, size_t requests,
                                          const absl::Status& status) {
    spdlog::error("{} backend run of {} requests failed: {}", std::string(lane), requests,
                  status.ToString());
  };
  s->scheduler_ = std::make_unique<Scheduler>(std::move(backends), scheduler_options);
  s->shutdown_timeout_ = options.shutdown_timeout;

  s->metrics_ = std::make_unique<metrics::Metrics>(
      NORMD_VERSION, kernels::CpuBackend::SimdTarget(),
      std::any_of(s->scheduler_->backends().begin(), s->scheduler_->backends().end(),
                  [](const auto& b) { return b->kind() == kernels::BackendKind::kCuda; }));
  s->env_.scheduler = s->scheduler_.get();
  s->env_.metrics = s->metrics_.get();
  s->env_.live_calls = &s->live_calls_;
  if (!options.auth_token_file.empty()) {
    absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth =
        TokenAuthenticator::Start(options.auth_token_file, options.reload_interval);
    if (!auth.ok()) return auth.status();
    s->auth_ = *std::move(auth);
    s->env_.auth = s->auth_.get();
  }
  TlsOptions tls = options.tls;
  tls.reload_interval = options.reload_interval;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  ServiceOptions& service_options = s->env_.options;
  service_options.max_message_bytes = options.max_message_bytes;
  service_options.stream_window = std::max(1, options.stream_window);
  service_options.cuda_absent_reason = s->cuda_absent_reason_;
  // The largest tensor that fits in a message: 2-byte elements.
  service_options.limits.max_elements = options.max_message_bytes / 2;

  // gRPC's own health service would add callback-API polling threads (health_service.h).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &s->port_);
  // One budget, two halves (memory_budget.h): gRPC's quota bounds what it buffers while
  // messages arrive (it shrinks flow-control windows under pressure, then refuses streams
  // with RESOURCE_EXHAUSTED), normd's bounds what requests hold once handed over.
  const int64_t budget = options.max_memory > 0 ? options.max_memory : DefaultMemoryBudget();
  grpc::ResourceQuota quota("normd");
  quota.Resize(static_cast<size_t>(budget / 2));
  builder.SetResourceQuota(quota);
  s->memory_ = std::make_unique<MemoryBudget>(budget - budget / 2);
  s->env_.memory = s->memory_.get();
  s->trimmer_ = std::make_unique<MemoryTrimmer>(s->memory_.get(), absl::Seconds(1));
  SetConnectionArguments(options.connections, &builder);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  builder.RegisterService(&s->service_);
  s->diagnostics_enabled_ = options.enable_diagnostics;
  if (options.enable_shared_memory) {
    s->shared_memory_ = std::make_unique<SharedMemoryRegistry>();
    s->env_.shared_memory = s->shared_memory_.get();
  }
  if (s->diagnostics_enabled_) builder.RegisterService(&s->diagnostics_);
  builder.RegisterService(&s->health_);
  const int threads = options.transport_threads > 0
                          ? options.transport_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 4);
  for (int i = 0; i < threads; ++i) s->queues_.push_back(builder.AddCompletionQueue());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("listen: could not bind ", options.listen));
  }
  for (auto& q : s->queues_) {
    const Listener at{&s->env_, &s->service_, s->diagnostics_enabled_ ? &s->diagnostics_ : nullptr,
                      q.get()};
    ListenUnary(at);
    ListenStreams(at);
    s->transport_.emplace_back([q = q.get()] {
      void* tag;
      bool ok;
      while (q->Next(&tag, &ok)) static_cast<CqEvent*>(tag)->Run(ok);
    });
  }
  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> endpoint =
        metrics::MetricsEndpoint::Start(options.metrics_listen,
                                        [srv = s.get()] { return srv->MetricsText(); });
    if (!endpoint.ok()) return endpoint.status();
    s->metrics_endpoint_ = *std::move(endpoint);
    spdlog::info("metrics on http://{}/metrics (port {})", options.metrics_listen,
                 s->metrics_endpoint_->port());
  }
  if (options.log_summary_interval > absl::ZeroDuration()) {
    s->log_summary_ = std::make_unique<LogSummary>(
        options.log_summary_interval, s->metrics_.get(), [srv = s.get()] {
          const SchedulerStats st = srv->scheduler_->stats();
          return metrics::Gauges{st.queued_requests, st.in_flight};
        });
  }
  s->health_.SetServing("", true);
  s->health_.SetServing(v1::NormService::service_full_name(), true);
  if (s->diagnostics_enabled_) {
    s->health_.SetServing(v1::DiagnosticsService::service_full_name(), true);
  }
  std::string backends_desc;
  for (const auto& b : s->scheduler_->backends()) {
    absl::StrAppend(&backends_desc, backends_desc.empty() ? "" : ", ",
                    b->kind() == kernels::BackendKind::kCuda ? "cuda [" : "cpu [", b->device(),
                    "]");
  }
  spdlog::info(
      "normd listening on {} (port {}), {}, {} transport thread(s), memory budget {} MiB, "
      "backends: {}",
      options.listen, s->port_,
      options.tls.cert_file.empty()        ? "plaintext"
      : options.tls.client_ca_file.empty() ? "TLS"
                                           : "mutual TLS",
      threads, budget >> 20, backends_desc);
  return s;
}

void NormServer::BeginDrain() { health_.Shutdown(); }

std::string NormServer::MetricsText() const {
  const SchedulerStats st = scheduler_->stats();
  return metrics_->Exposition({st.queued_requests, st.in_flight});
}

void NormServer::Shutdown() {
  if (!server_ || shut_down_) return;
  shut_down_ = true;
  // Health first, so that probes and balancers stop sending before the listener closes.
  BeginDrain();
  // Calls in flight keep being served by the transport threads until they finish or the
  // drain timeout cancels them; then the scheduler answers what it still holds (its
  // completions post to the queues, which must still be open). gRPC reports the stopped
  // calls' last events after its Shutdown returns, and some still start an operation then
  // (a stream's Finish after its last read failed; a listener matched just before, arming
  // the next): the queues close only once every call object is gone (live_calls.h), and
  // their threads leave once every event is taken.
  server_->Shutdown(absl::ToChronoTime(absl::Now() + shutdown_timeout_));
  scheduler_->Shutdown();
  if (!live_calls_.AwaitNone(kCallsGoneTimeout)) {
    // Not expected: a call object that never ends. Closing the queues under it may abort
    // the process should it start an operation, but waiting forever would hang the exit.
    spdlog::error("shutdown: {} call(s) still open {} after the server stopped; closing anyway",
                  live_calls_.count(), absl::FormatDuration(kCallsGoneTimeout));
  }
  for (auto& q : queues_) q->Shutdown();
  for (auto& t : transport_) t.join();
  log_summary_.reset();
  metrics_endpoint_.reset();
}

NormServer::~NormServer() { Shutdown(); }

}  // namespace normd::server
