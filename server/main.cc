// normd: parses flags, starts the server, waits for SIGINT/SIGTERM and drains.
#include <csignal>
#include <cstdio>
#include <thread>

#include "normd/common/cli_flags.h"
#include "normd/common/process_tuning.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kUsage[] =
    "usage: normd [flags]\n"
    "  --listen                  address to serve on (default 0.0.0.0:50051; port 0 picks one)\n"
    "  --max-message-bytes       largest request/response message (default 268435456)\n"
    "  --cpu-threads             CPU backend worker threads (default: every core)\n"
    "  --max-queue-requests      requests queued per backend before UNAVAILABLE (default 1024)\n"
    "  --max-queue-bytes         bytes queued per backend before UNAVAILABLE (default 1 GiB)\n"
    "  --batch-max-rows          rows one batched backend run may hold; 1 turns batching off\n"
    "                            (default 8192)\n"
    "  --batch-max-bytes         bytes one batched backend run may hold (default 16 MiB)\n"
    "  --batch-max-delay-us      how long a CPU batch waits for batchmates (default 0)\n"
    "  --cuda-batch-max-delay-us the same for CUDA (default 0)\n"
    "  --cuda-min-bytes          AUTO routes inputs of at least this size to CUDA (default 1 MiB)\n"
    "  --inline-max-bytes        CPU work up to this size runs on the transport thread when the\n"
    "                            queue is empty; 0: never (default 262144)\n"
    "  --stream-window           requests of one stream in flight at once (default 64)\n"
    "  --transport-threads       threads polling gRPC's completion queues (default: a quarter\n"
    "                            of the cores, at least 1)\n"
    "  --no-cuda                 serve from the CPU only, even with a GPU present\n"
    "  --no-diagnostics          do not serve normd.v1.DiagnosticsService (Echo, EchoStream)\n"
    "  --log-level               trace|debug|info|warn|error (default info)\n";

// Reads integer flag `name` into *out when given, checking [lo, hi].
bool IntFlag(const normd::CliFlags& flags, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  absl::StatusOr<int64_t> v = flags.GetInt(name, *out);
  if (!v.ok() || *v < lo || *v > hi) {
    std::fprintf(stderr, "normd: --%s: expected an integer from %lld to %lld, got '%s'\n", name,
                 static_cast<long long>(lo), static_cast<long long>(hi),
                 flags.GetString(name).c_str());
    return false;
  }
  *out = *v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  normd::CliFlags flags({{"listen", false},
                         {"max-message-bytes", false},
                         {"log-level", false},
                         {"cpu-threads", false},
                         {"max-queue-requests", false},
                         {"max-queue-bytes", false},
                         {"batch-max-rows", false},
                         {"batch-max-bytes", false},
                         {"batch-max-delay-us", false},
                         {"cuda-batch-max-delay-us", false},
                         {"cuda-min-bytes", false},
                         {"inline-max-bytes", false},
                         {"stream-window", false},
                         {"transport-threads", false},
                         {"no-cuda", true},
                         {"no-diagnostics", true},
                         {"help", true}});
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() || flags.GetBool("help")) {
    if (!s.ok()) std::fprintf(stderr, "normd: %s\n", std::string(s.message()).c_str());
    std::fputs(kUsage, stderr);
    return s.ok() ? 0 : 2;
  }
  spdlog::set_level(spdlog::level::from_str(flags.GetString("log-level", "info")));
  normd::TuneProcessForMessages();
  normd::server::ServerOptions options;
  normd::server::SchedulerOptions& sched = options.scheduler;
  options.listen = flags.GetString("listen", options.listen);
  constexpr int64_t kMax = int64_t{1} << 50;
  int64_t cpu_threads = 0, stream_window = options.stream_window, transport_threads = 0;
  int64_t cpu_delay_us = absl::ToInt64Microseconds(sched.cpu_batch_max_delay);
  int64_t cuda_delay_us = absl::ToInt64Microseconds(sched.cuda_batch_max_delay);
  if (!IntFlag(flags, "max-message-bytes", 1, INT32_MAX, &options.max_message_bytes) ||
      !IntFlag(flags, "cpu-threads", 0, 1024, &cpu_threads) ||
      !IntFlag(flags, "max-queue-requests", 1, kMax, &sched.max_queue_requests) ||
      !IntFlag(flags, "max-queue-bytes", 1, kMax, &sched.max_queue_bytes) ||
      !IntFlag(flags, "batch-max-rows", 1, kMax, &sched.batch_max_rows) ||
      !IntFlag(flags, "batch-max-bytes", 1, kMax, &sched.batch_max_bytes) ||
      !IntFlag(flags, "batch-max-delay-us", 0, 10'000'000, &cpu_delay_us) ||
      !IntFlag(flags, "cuda-batch-max-delay-us", 0, 10'000'000, &cuda_delay_us) ||
      !IntFlag(flags, "cuda-min-bytes", 0, kMax, &sched.cuda_min_bytes) ||
      !IntFlag(flags, "inline-max-bytes", 0, kMax, &sched.inline_max_bytes) ||
      !IntFlag(flags, "stream-window", 1, 65536, &stream_window) ||
      !IntFlag(flags, "transport-threads", 0, 256, &transport_threads)) {
    return 2;
  }
  options.cpu_threads = static_cast<int>(cpu_threads);
  options.enable_cuda = !flags.GetBool("no-cuda");
  options.enable_diagnostics = !flags.GetBool("no-diagnostics");
  options.stream_window = static_cast<int>(stream_window);
  options.transport_threads = static_cast<int>(transport_threads);
  sched.cpu_batch_max_delay = absl::Microseconds(cpu_delay_us);
  sched.cuda_batch_max_delay = absl::Microseconds(cuda_delay_us);

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
