#include "server/server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "normd/kernels/cpu_backend.h"
#include "normd/kernels/cuda_backend.h"
#include "spdlog/spdlog.h"

namespace normd::server {

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
  s->scheduler_ = std::make_unique<Scheduler>(std::move(backends), options.scheduler);
  s->drain_timeout_ = options.drain_timeout;

  ServiceOptions service_options;
  service_options.max_message_bytes = options.max_message_bytes;
  service_options.stream_window = std::max(1, options.stream_window);
  service_options.cuda_absent_reason = s->cuda_absent_reason_;
  // The largest tensor that fits in a message: 2-byte elements.
  service_options.limits.max_elements = options.max_message_bytes / 2;
  s->service_ = std::make_unique<NormServiceImpl>(s->scheduler_.get(), service_options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("listen: could not bind ", options.listen));
  }
  s->server_->GetHealthCheckService()->SetServingStatus(v1::NormService::service_full_name(), true);
  std::string backends_desc;
  for (const auto& b : s->scheduler_->backends()) {
    absl::StrAppend(&backends_desc, backends_desc.empty() ? "" : ", ",
                    b->kind() == kernels::BackendKind::kCuda ? "cuda [" : "cpu [", b->device(),
                    "]");
  }
  spdlog::info("normd listening on {} (port {}), backends: {}", options.listen, s->port_,
               backends_desc);
  return s;
}

void NormServer::Shutdown() {
  if (!server_ || shut_down_) return;
  shut_down_ = true;
  // Health first, so that probes and balancers stop sending before the listener closes.
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + drain_timeout_));
  scheduler_->Shutdown();
}

NormServer::~NormServer() { Shutdown(); }

}  // namespace normd::server
