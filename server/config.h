// normd's configuration: every flag, its default, and its environment variable. A flag
// `--max-queue-bytes` can also be set as NORMD_MAX_QUEUE_BYTES; the flag wins. Durations
// take units (absl's syntax: `500ms`, `2s`, `1m30s`); sizes take bytes or `KiB`, `MiB`,
// `GiB`. Variables named NORMD_* that are no flag are ignored: Kubernetes sets
// NORMD_SERVICE_HOST and the like for a Service called normd.
//
//   absl::StatusOr<ServerConfig> config = ParseConfig(argc, argv, environ);
//   if (!config.ok()) { std::cerr << config.status().message(); return 2; }
//
// Stateless functions; safe from any thread.
#ifndef NORMD_SERVER_CONFIG_H_
#define NORMD_SERVER_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/server.h"

namespace normd::server {

struct ServerConfig {
  ServerOptions server;
  std::string log_level = "info";                           // trace|debug|info|warn|error
  std::string log_format = "text";                          // text|json
  absl::Duration log_summary_interval = absl::Seconds(60);  // 0: no summary
  std::string metrics_listen;                               // empty: no metrics endpoint
  // SIGTERM/SIGINT: health NOT_SERVING at once, keep serving this long (load balancers and
  // Kubernetes endpoints notice), then stop accepting and finish what was accepted within
  // shutdown_timeout.
  absl::Duration drain_delay = absl::ZeroDuration();
  absl::Duration shutdown_timeout = absl::Seconds(10);
  bool help = false;  // --help was given: print ConfigHelp() and exit 0
};

// Parses argv (program name first) and the environment (`envp`: "NAME=value" strings,
// null-terminated, as `environ`). An unknown flag, a missing or malformed value, or one out
// of range is INVALID_ARGUMENT naming the flag and, when it came from there, the variable.
absl::StatusOr<ServerConfig> ParseConfig(int argc, char** argv, char** envp);

// `normd --help`: every flag with its variable, default and meaning.
std::string ConfigHelp();

// "1GiB" -> 1073741824; bytes, or a number with KiB, MiB or GiB (no fractions).
absl::StatusOr<int64_t> ParseSize(absl::string_view text);

}  // namespace normd::server

#endif  // NORMD_SERVER_CONFIG_H_
