// normd-large-bench: large f32 LayerNorm round trips through normd, each beside its limit
// measured in the same run (BENCHMARKS.md, "Large tensors"):
//   tcp     the same bytes echoed over a plain loopback TCP connection (the wire's limit)
//   kernel  the CPU kernel alone on the server's threads (the memory's limit), each answer
//           checked between calls as every other path's is
//   unary   one Normalize call carrying the whole tensor
//   chunked the client's default: row chunks pipelined over NormalizeStream
//   shm     the tensor in a POSIX shared-memory region registered with normd
// The server is a normd child process started here with --normd (and --server-flags).
//
//   normd-large-bench --normd build/server/normd [--sizes 1,4,16,64] [--reps 7]
//       [--chunk-bytes N] [--window N] [--json FILE] [--server-flags "--cpu-threads 2"]
//       [--client-grpc-args NAME=INT,...] [--no-shm] [--paths tcp,kernel,unary,chunked,shm]
// --paths measures only the paths named (for a profile of one of them); the ratios of a
// path not measured print as 0.
// Beside the round trips it prints each path's CPU time per call (this process, with its
// TCP echo thread and kernel threads, and normd: a round trip cannot be shorter than that
// over the cores), and how the server timed its shared-memory calls (compute, and receipt
// to answer), to tell where a round trip beyond its limit goes.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/large_paths.h"
#include "bench/tcp_echo.h"
#include "normd/client.h"
#include "normd/common/channel_args.h"
#include "normd/common/cli_flags.h"
#include "normd/common/machine_steal.h"
#include "normd/common/process_tuning.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::bench {
namespace {

constexpr int64_t kCols = 4096;

struct Flags {
  std::string normd, server_flags, json;
  std::vector<int64_t> sizes_mib = {1, 4, 16, 64};
  int reps = 7;
  ClientOptions::Chunking chunking;
  ChannelArgs client_args;
  bool shm = true;
  static constexpr const char* kPaths[] = {"tcp", "kernel", "unary", "chunked", "shm"};
  std::vector<std::string> paths = {std::begin(kPaths), std::end(kPaths)};
  bool Wants(absl::string_view path) const {
    return std::find(paths.begin(), paths.end(), path) != paths.end() && (shm || path != "shm");
  }
};

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Starts normd on `port`; before anything of gRPC's starts in this process (a fork keeps
// none of it).
pid_t StartNormd(const Flags& f, int port) {
  std::vector<std::string> args = {f.normd, "--listen", absl::StrCat("127.0.0.1:", port),
                                   "--log-level", "warn"};
  for (absl::string_view a : absl::StrSplit(f.server_flags, ' ', absl::SkipEmpty())) {
    args.emplace_back(a);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::perror("normd-large-bench: exec normd");
    _exit(127);
  }
  return pid;
}

// The CPU time `pid` (0: this process) has used, all its threads together; nullopt where the
// clock cannot be read.
std::optional<absl::Duration> CpuTime(pid_t pid) {
  clockid_t clock = CLOCK_PROCESS_CPUTIME_ID;
  if (pid != 0 && clock_getcpuclockid(pid, &clock) != 0) return std::nullopt;
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return std::nullopt;
  return absl::DurationFromTimespec(ts);
}

// The median, minimum and maximum of `runs` timed calls of `once` (after one untimed), and
// the CPU time a call cost the two processes together (this one, with its TCP echo thread
// and kernel threads, and normd): on N cores a round trip cannot be shorter than 1/N of
// it, whatever the waits.
struct Figure {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double cpu_ms = -1;  // per call, both processes; -1: not measured
};
absl::StatusOr<Figure> Measure(int reps, pid_t server,
                               const std::function<absl::StatusOr<absl::Duration>()>& once) {
  if (absl::StatusOr<absl::Duration> warm = once(); !warm.ok()) return warm.status();
  const std::optional<absl::Duration> self0 = CpuTime(0), server0 = CpuTime(server);
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    absl::StatusOr<absl::Duration> d = once();
    if (!d.ok()) return d.status();
    ms.push_back(absl::ToDoubleMilliseconds(*d));
  }
  const std::optional<absl::Duration> self1 = CpuTime(0), server1 = CpuTime(server);
  std::sort(ms.begin(), ms.end());
  Figure f{ms[ms.size() / 2], ms.front(), ms.back()};
  if (self0 && self1 && server0 && server1) {
    f.cpu_ms = absl::ToDoubleMilliseconds((*self1 - *self0) + (*server1 - *server0)) / reps;
  }
  return f;
}

int Run(const Flags& f) {
  const int port = FreePort();
  const pid_t server = StartNormd(f, port);
  ClientOptions whole_options;
  whole_options.channel_args = f.client_args;
  whole_options.chunking.threshold_bytes = 0;
  ClientOptions chunked_options;
  chunked_options.chunking = f.chunking;
  chunked_options.channel_args = f.client_args;
  const std::string target = absl::StrCat("127.0.0.1:", port);
  auto whole = Client::Create(target, whole_options);
  auto chunked = Client::Create(target, chunked_options);
  if (!whole.ok() || !chunked.ok()) return 2;
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    absl::StatusOr<bool> h = (*whole)->CheckHealth();
    up = h.ok() && *h;
    if (!up) absl::SleepFor(absl::Milliseconds(50));
  }
  absl::StatusOr<v1::GetServerInfoResponse> info = (*whole)->GetServerInfo();
  if (!up || !info.ok()) {
    std::fprintf(stderr, "normd-large-bench: normd did not start on %s\n", target.c_str());
    kill(server, SIGKILL);
    return 2;
  }
  int threads = 1;
  for (const auto& b : info->backends()) {
    if (b.backend() == v1::BACKEND_CPU) threads = b.threads();
  }
  kernels::CpuBackend kernel_backend({.threads = threads});
  const std::optional<absl::Duration> steal_before = MachineStealTime();
  auto echo = TcpEcho::Start();
  if (!echo.ok()) return 2;
  std::printf(
      "normd-large-bench: f32 LayerNorm [rows, %lld], round trips in ms (median of %d, "
      "min-max), every figure from this run; server CPU threads %d; chunks %lld B, window "
      "%d\n",
      static_cast<long long>(kCols), f.reps, threads,
      static_cast<long long>(f.chunking.chunk_bytes), f.chunking.window);
  std::printf("%8s %16s %16s %16s %16s %16s %9s %9s %9s\n", "MiB", "tcp echo", "kernel", "unary",
              "chunked", "shm", "unary/tcp", "chunk/tcp", "shm/kern");
  std::string json = "{\"normd_large_bench\": [";
  std::string shm_server_lines, cpu_lines;
  int exit_code = 0;
  for (int64_t mib : f.sizes_mib) {
    const int64_t rows = (mib << 20) / (kCols * 4);
    LargeCase c = LargeCase::Make(rows, kCols);
    std::vector<std::pair<std::string, absl::StatusOr<Figure>>> figures;
    auto measure = [&](const char* name,
                       const std::function<absl::StatusOr<absl::Duration>()>& once) {
      figures.emplace_back(
          name, f.Wants(name) ? Measure(f.reps, server, once) : absl::StatusOr<Figure>(Figure{}));
    };
    measure("tcp", [&] { return (*echo)->RoundTrip(c.request.input().data()); });
    measure("kernel", [&] { return c.RunKernel(kernel_backend); });
    // The kernel's answer is what every path is checked against, measured or not.
    if (!f.Wants("kernel") && !c.RunKernel(kernel_backend).ok()) exit_code = 1;
    measure("unary", [&] { return c.Call(**whole); });
    measure("chunked", [&] { return c.Call(**chunked); });
    measure("shm", [&] { return c.CallShm(**whole); });
    std::string cells;
    std::vector<double> median;
    absl::StrAppend(&json, mib == f.sizes_mib.front() ? "" : ", ", "{\"mib\": ", mib);
    for (auto& [name, fig] : figures) {
      if (!fig.ok()) {
        std::fprintf(stderr, "normd-large-bench: %s at %lld MiB: %s\n", name.c_str(),
                     static_cast<long long>(mib), fig.status().ToString().c_str());
        exit_code = 1;
        median.push_back(0);
        cells += absl::StrFormat(" %16s", "failed");
        continue;
      }
      if (!f.Wants(name)) {
        median.push_back(0);
        cells += absl::StrFormat(" %16s", "-");
        continue;
      }
      median.push_back(fig->median_ms);
      cells += absl::StrFormat(
          " %16s", absl::StrFormat("%.2f (%.1f-%.1f)", fig->median_ms, fig->min_ms, fig->max_ms));
      absl::StrAppend(&json, ", \"", name, "_ms\": ", fig->median_ms, ", \"", name,
                      "_min_ms\": ", fig->min_ms, ", \"", name, "_max_ms\": ", fig->max_ms);
    }
    absl::StrAppend(&cpu_lines, absl::StrFormat("%8lld", static_cast<long long>(mib)));
    for (auto& [name, fig] : figures) {
      const double cpu = fig.ok() && f.Wants(name) ? fig->cpu_ms : -1;
      absl::StrAppend(&cpu_lines,
                      cpu < 0 ? absl::StrFormat(" %9s", "-") : absl::StrFormat(" %9.2f", cpu));
      if (cpu >= 0) absl::StrAppend(&json, ", \"", name, "_cpu_ms\": ", cpu);
    }
    absl::StrAppend(&cpu_lines, "\n");
    if (c.shm_timings.size() > 1) {
      // The timed calls' own figures (the first call was the untimed warm-up).
      std::vector<double> compute, total;
      for (size_t i = 1; i < c.shm_timings.size(); ++i) {
        compute.push_back(c.shm_timings[i].compute_us() / 1e3);
        total.push_back(c.shm_timings[i].total_us() / 1e3);
      }
      std::sort(compute.begin(), compute.end());
      std::sort(total.begin(), total.end());
      const double cm = compute[compute.size() / 2], tm = total[total.size() / 2];
      absl::StrAppend(&shm_server_lines,
                      absl::StrFormat("%8lld %16.2f %16.2f %16.2f\n", static_cast<long long>(mib),
                                      cm, tm, median[4]));
      absl::StrAppend(&json, ", \"shm_server_compute_ms\": ", cm,
                      ", \"shm_server_total_ms\": ", tm);
    }
    auto ratio = [](double a, double b) { return b > 0 && a > 0 ? a / b : 0.0; };
    std::printf("%8lld%s %9.2f %9.2f %9.2f\n", static_cast<long long>(mib), cells.c_str(),
                ratio(median[2], median[0]), ratio(median[3], median[0]),
                ratio(median[4], median[1]));
    absl::StrAppend(&json, ", \"unary_over_tcp\": ", ratio(median[2], median[0]),
                    ", \"chunked_over_tcp\": ", ratio(median[3], median[0]),
                    ", \"shm_over_kernel\": ", ratio(median[4], median[1]), "}");
    std::fflush(stdout);
  }
  // A call's CPU time over the machine's cores is the shortest its round trip could be.
  std::printf(
      "CPU time per call, this process and normd together (ms; %u cores online):\n%8s %9s %9s "
      "%9s %9s %9s\n%s",
      std::thread::hardware_concurrency(), "MiB", "tcp echo", "kernel", "unary", "chunked", "shm",
      cpu_lines.c_str());
  if (!shm_server_lines.empty()) {
    // Where a shared-memory round trip goes: the server's backend run, its time from
    // receiving the request to the answer being ready (medians of its own Timing), and the
    // caller's round trip.
    std::printf("shm, as the server timed it (ms, medians):\n%8s %16s %16s %16s\n%s", "MiB",
                "server compute", "server total", "round trip", shm_server_lines.c_str());
  }
  const int64_t steal_ms = StealMs(steal_before, MachineStealTime());
  std::printf("cpu steal during the run: %lld ms\n", static_cast<long long>(steal_ms));
  absl::StrAppend(&json, "], \"steal_ms\": ", steal_ms, "}\n");
  if (!f.json.empty()) std::ofstream(f.json) << json;
  whole->reset();
  chunked->reset();
  kill(server, SIGTERM);
  int status = 0;
  waitpid(server, &status, 0);
  return exit_code;
}

}  // namespace
}  // namespace normd::bench

int main(int argc, char** argv) {
  normd::CliFlags flags({{"normd", false},
                         {"server-flags", false},
                         {"sizes", false},
                         {"reps", false},
                         {"chunk-bytes", false},
                         {"window", false},
                         {"json", false},
                         {"no-shm", true},
                         {"paths", false},
                         {"client-grpc-args", false}});
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "normd-large-bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  normd::bench::Flags f;
  f.normd = flags.GetString("normd");
  f.server_flags = flags.GetString("server-flags");
  f.json = flags.GetString("json");
  f.shm = !flags.GetBool("no-shm");
  if (std::string paths = flags.GetString("paths"); !paths.empty()) {
    f.paths = absl::StrSplit(paths, ',');
    for (const std::string& p : f.paths) {
      if (std::find(std::begin(normd::bench::Flags::kPaths), std::end(normd::bench::Flags::kPaths),
                    p) == std::end(normd::bench::Flags::kPaths)) {
        std::fprintf(stderr, "normd-large-bench: --paths: tcp, kernel, unary, chunked, shm\n");
        return 2;
      }
    }
  }
  absl::StatusOr<normd::ChannelArgs> client_args =
      normd::ParseChannelArgs(flags.GetString("client-grpc-args"));
  if (!client_args.ok()) {
    std::fprintf(stderr, "normd-large-bench: --client-grpc-args: %s\n",
                 std::string(client_args.status().message()).c_str());
    return 2;
  }
  f.client_args = *client_args;
  absl::StatusOr<int64_t> reps = flags.GetInt("reps", f.reps);
  absl::StatusOr<int64_t> chunk = flags.GetInt("chunk-bytes", f.chunking.chunk_bytes);
  absl::StatusOr<int64_t> window = flags.GetInt("window", f.chunking.window);
  if (!reps.ok() || !chunk.ok() || !window.ok() || *reps < 1 || *chunk < 1 || *window < 1) {
    std::fprintf(stderr, "normd-large-bench: --reps, --chunk-bytes, --window: positive integers\n");
    return 2;
  }
  f.reps = static_cast<int>(*reps);
  f.chunking.chunk_bytes = *chunk;
  f.chunking.window = static_cast<int>(*window);
  if (std::string sizes = flags.GetString("sizes"); !sizes.empty()) {
    f.sizes_mib.clear();
    for (absl::string_view s : absl::StrSplit(sizes, ',')) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(s, &v) || v < 1) {
        std::fprintf(stderr, "normd-large-bench: --sizes: MiB, comma-separated\n");
        return 2;
      }
      f.sizes_mib.push_back(v);
    }
  }
  if (f.normd.empty()) {
    std::fprintf(stderr, "normd-large-bench: --normd PATH is required\n");
    return 2;
  }
  // As normbench and normd: the client's receive buffers stay mapped between messages.
  normd::TuneProcessForMessages();
  normd::TuneProcessForLargeAnswers();
  return normd::bench::Run(f);
}
