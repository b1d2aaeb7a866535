// normd: reads its configuration (flags and NORMD_* variables, config.h), starts the
// server, and on SIGTERM or SIGINT drains: health NOT_SERVING at once, serving on for
// --drain-delay, then no new calls and --shutdown-timeout for the accepted ones; exit 0.
// A second signal exits at once (status 1). A bad configuration exits 2.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/time/clock.h"
#include "normd/common/process_tuning.h"
#include "server/config.h"
#include "server/logging.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

extern char** environ;

int main(int argc, char** argv) {
  // Block the stop signals first, before any thread starts (spdlog's flusher, gRPC's,
  // the pools), so that every thread inherits the mask and one thread waits for them
  // synchronously: a thread that did not would take SIGTERM's default action and end the
  // process without a drain.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<normd::server::ServerConfig> config =
      normd::server::ParseConfig(argc, argv, environ);
  if (!config.ok()) {
    std::fprintf(stderr, "normd: %s\n(normd --help lists every flag)\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  if (config->help) {
    std::fputs(normd::server::ConfigHelp().c_str(), stdout);
    return 0;
  }
  if (absl::Status s = normd::server::ConfigureLogging(config->log_level, config->log_format);
      !s.ok()) {
    std::fprintf(stderr, "normd: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  normd::TuneProcessForMessages();
  normd::server::ServerOptions options = config->server;
  options.shutdown_timeout = config->shutdown_timeout;
  options.metrics_listen = config->metrics_listen;
  options.log_summary_interval = config->log_summary_interval;

  auto server = normd::server::NormServer::Start(options);
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  const absl::Duration drain_delay = config->drain_delay;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info(
        "signal {}: health NOT_SERVING; serving on for {}, then {} for accepted calls "
        "(a second signal exits at once)",
        sig, absl::FormatDuration(drain_delay), absl::FormatDuration(options.shutdown_timeout));
    (*server)->BeginDrain();
    std::thread([&stop_signals] {
      int again = 0;
      sigwait(&stop_signals, &again);
      spdlog::warn("signal {} again: exiting at once", again);
      spdlog::default_logger()->flush();
      std::_Exit(1);
    }).detach();
    absl::SleepFor(drain_delay);
    spdlog::info("drain delay over: no new calls; finishing those accepted");
    (*server)->Shutdown();
  });
  (*server)->Wait();
  waiter.join();
  spdlog::info("normd stopped");
  return 0;
}
