// A real normd server on loopback whose only backend is normd_testing's GatedBackend, with
// one executor and no inline path, so that a test decides when queued requests run. Shared
// by the serving, error-code and retry tests. Not thread-safe; set up in a fixture.
#ifndef NORMD_TESTS_INTEGRATION_GATED_SERVER_H_
#define NORMD_TESTS_INTEGRATION_GATED_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "normd/testing/gated_backend.h"
#include "server/server.h"

namespace normd::testing {

struct GatedServer {
  std::shared_ptr<GatedBackend> gate;
  std::unique_ptr<server::NormServer> server;
  std::string target;  // "127.0.0.1:PORT"
};

// `options` completed with an ephemeral loopback port, the gated backend, one CPU executor
// and no inline path; the rest (queue bounds, auth, limits) is the caller's.
inline absl::StatusOr<GatedServer> StartGatedServer(server::ServerOptions options = {}) {
  GatedServer g;
  g.gate = std::make_shared<GatedBackend>();
  options.listen = "127.0.0.1:0";
  options.backends = {g.gate};
  options.scheduler.cpu_executors = 1;
  options.scheduler.inline_max_bytes = 0;
  absl::StatusOr<std::unique_ptr<server::NormServer>> s = server::NormServer::Start(options);
  if (!s.ok()) return s.status();
  g.server = *std::move(s);
  g.target = absl::StrCat("127.0.0.1:", g.server->port());
  return g;
}

}  // namespace normd::testing

#endif  // NORMD_TESTS_INTEGRATION_GATED_SERVER_H_
