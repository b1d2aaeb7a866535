#include "server/metrics/metrics_endpoint.h"

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace normd::server::metrics {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, std::function<std::string()> exposition) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics-listen: expected HOST:PORT, got '", listen, "'"));
  }
  absl::string_view host = absl::string_view(listen).substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  e->http_ = std::make_unique<httplib::Server>();
  // One worker: cpp-httplib's default pool is at least 8 threads.
  e->http_->new_task_queue = [] { return new httplib::ThreadPool(1); };
  e->http_->Get("/metrics", [exposition](const httplib::Request&, httplib::Response& res) {
    res.set_content(exposition(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const std::string h(host.empty() ? "0.0.0.0" : host);
  if (port == 0) {
    e->port_ = e->http_->bind_to_any_port(h);
  } else if (e->http_->bind_to_port(h, port)) {
    e->port_ = port;
  }
  if (e->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics-listen: could not bind ", listen));
  }
  e->thread_ = std::thread([http = e->http_.get()] { http->listen_after_bind(); });
  // stop() before the loop runs would be lost and the thread would never leave.
  while (!e->http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return e;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace normd::server::metrics
