// normd: parses flags, starts the server, waits for SIGINT/SIGTERM and drains.
#include <csignal>
#include <cstdio>
#include <thread>

#include "common/cli_flags.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kUsage[] =
    "usage: normd [--listen HOST:PORT] [--max-message-bytes N] [--log-level LEVEL]\n"
    "  --listen             address to serve on (default 0.0.0.0:50051; port 0 picks one)\n"
    "  --max-message-bytes  largest request/response message (default 268435456)\n"
    "  --cpu-threads        CPU backend worker threads (default: every core)\n"
    "  --log-level          trace|debug|info|warn|error (default info)\n";

}  // namespace

int main(int argc, char** argv) {
  normd::CliFlags flags(
      {{"listen", false}, {"max-message-bytes", false}, {"log-level", false}, {"cpu-threads", false}, {"help", true}});
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() || flags.GetBool("help")) {
    if (!s.ok()) std::fprintf(stderr, "normd: %s\n", std::string(s.message()).c_str());
    std::fputs(kUsage, stderr);
    return s.ok() ? 0 : 2;
  }
  spdlog::set_level(spdlog::level::from_str(flags.GetString("log-level", "info")));
  normd::server::ServerOptions options;
  options.listen = flags.GetString("listen", options.listen);
  absl::StatusOr<int64_t> max_bytes = flags.GetInt("max-message-bytes", options.max_message_bytes);
  if (!max_bytes.ok()) {
    std::fprintf(stderr, "normd: %s\n", std::string(max_bytes.status().message()).c_str());
    return 2;
  }
  options.max_message_bytes = *max_bytes;
  absl::StatusOr<int64_t> cpu_threads = flags.GetInt("cpu-threads", 0);
  if (!cpu_threads.ok() || *cpu_threads < 0 || *cpu_threads > 1024) {
    std::fprintf(stderr, "normd: --cpu-threads: expected 0 to 1024\n");
    return 2;
  }
  options.cpu_threads = static_cast<int>(*cpu_threads);

  // Block the stop signals here so that every thread inherits the mask and one thread
  // waits for them synchronously.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = normd::server::NormServer::Start(options);
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("signal {}: draining", sig);
    (*server)->Shutdown();
  });
  (*server)->Wait();
  waiter.join();
  spdlog::info("normd stopped");
  return 0;
}
