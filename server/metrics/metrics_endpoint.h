// The HTTP endpoint Prometheus scrapes: GET /metrics answers the text exposition that
// `exposition` returns at that moment. Served by cpp-httplib (Debian's
// libcpp-httplib-dev) on a thread of its own with a single worker: scrapes are rare and
// small.
//
// Thread safety: Start once; the destructor stops the server and joins its thread.
// `exposition` is called on the endpoint's worker thread.
#ifndef NORMD_SERVER_METRICS_METRICS_ENDPOINT_H_
#define NORMD_SERVER_METRICS_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace normd::server::metrics {

class MetricsEndpoint {
 public:
  // `listen`: HOST:PORT ("[::]:9090" for IPv6); port 0 picks a free one. UNAVAILABLE when
  // it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, std::function<std::string()> exposition);
  ~MetricsEndpoint();

  int port() const { return port_; }

 private:
  MetricsEndpoint() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace normd::server::metrics

#endif  // NORMD_SERVER_METRICS_METRICS_ENDPOINT_H_
