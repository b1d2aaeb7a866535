// normbench: a load generator for normd. Closed loop, `--concurrency` callers each keep one
// request in flight (unary calls, or one bidirectional stream per caller with --stream) for
// `--duration` seconds, driven by gRPC callbacks (client/load_gen.h); open loop (--rate),
// requests go on a fixed schedule (unary: from one thread, asynchronously, at most
// --concurrency in flight; streams: a thread per stream); then it prints
// (and with --json writes) the counts, throughput, latency percentiles overall and per
// status code, how many answers carried another request's id (must be 0), and how much
// CPU time the hypervisor took from the machine meanwhile (machine_steal_ms; -1 where
// the kernel does not say). --echo measures the transport alone through the Echo RPCs.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "credential_flags.h"
#include "normd/client.h"
#include "normd/common/cli_flags.h"
#include "normd/common/machine_steal.h"
#include "normd/common/process_tuning.h"
#include "normd/load/load_gen.h"

namespace normd {
namespace {

constexpr char kUsage[] =
    "usage: normbench [--target HOST:PORT] [--op rms-norm|layer-norm|l2-norm] [--shape 1x4096]\n"
    "                 [--dtype f32|f16|bf16] [--concurrency N] [--duration SECONDS] [--stream]\n"
    "                 [--echo] [--rate RPS] [--backend auto|cpu|cuda] [--timeout-ms MS]\n"
    "                 [--connections N] [--json FILE] [--max-attempts 1..5]\n"
    "  --target       any gRPC target; several addresses (ipv4:A:P,B:P or dns:///) are\n"
    "                 balanced round_robin\n"
    "  --max-attempts attempts per call: UNAVAILABLE (a replica gone, a full queue) is\n"
    "                 retried on the next address with backoff (default 5; 1: never)\n"
    "  --concurrency  callers, each with one request in flight (one stream each with\n"
    "                 --stream), driven by gRPC callbacks rather than a thread each\n"
    "  --connections  gRPC connections to open; callers and calls take turns (default 1)\n"
    "  --echo         call Echo/EchoStream (the transport alone) instead of Normalize\n"
    "  --rate         open loop: send this many requests per second in all, on a fixed\n"
    "                 schedule; latency counts from the scheduled send time. Unary calls go\n"
    "                 asynchronously from one thread, at most --concurrency in flight;\n"
    "                 send_late_us in the JSON says how late the sender itself was\n";

using WorkerStats = LoadStats;

struct Setup {
  v1::NormalizeRequest request;
  bool stream = false, echo = false;
  double rate = 0;  // per worker, requests/s; 0: closed loop
  int64_t workers = 1;
  absl::Time start, end;
  std::vector<Client*> clients;  // one per connection; calls and workers take turns
};

absl::StatusOr<v1::NormalizeRequest> MakeRequest(const CliFlags& f) {
  v1::NormalizeRequest r;
  std::vector<int64_t> shape;
  for (absl::string_view d : absl::StrSplit(f.GetString("shape", "1x4096"), 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--shape: expected e.g. 1x4096, got '", f.GetString("shape"), "'"));
    }
    shape.push_back(v);
  }
  const std::string dt = f.GetString("dtype", "f32");
  DType dtype = dt == "f16" ? DType::kF16 : dt == "bf16" ? DType::kBF16 : DType::kF32;
  if (dt != "f32" && dt != "f16" && dt != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: expected f32, f16 or bf16, got '", dt, "'"));
  }
  HostTensor x(dtype, shape);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> values(x.numel());
  for (auto& v : values) v = dist(rng);
  ToWire(HostTensor::FromFloats(dtype, shape, values), r.mutable_input());
  const std::string op = f.GetString("op", "rms-norm");
  if (op == "rms-norm") {
    r.mutable_rms_norm();
  } else if (op == "layer-norm") {
    r.mutable_layer_norm();
  } else if (op == "l2-norm") {
    r.mutable_l2_norm();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--op: expected rms-norm, layer-norm or l2-norm, got '", op, "'"));
  }
  const std::string backend = f.GetString("backend", "auto");
  if (backend == "cpu") {
    r.set_backend(v1::BACKEND_CPU);
  } else if (backend == "cuda") {
    r.set_backend(v1::BACKEND_CUDA);
  } else if (backend != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend: expected auto, cpu or cuda, got '", backend, "'"));
  }
  return r;
}

// Open loop on streams: request n of a worker goes at start + n / rate, or at once when the
// worker is late. Workers are phased evenly so that sends do not come in bursts.
absl::Time NextSend(const Setup& setup, int index, int64_t n) {
  const double phase = static_cast<double>(index) / static_cast<double>(setup.workers);
  const absl::Time at = setup.start + absl::Seconds((static_cast<double>(n) + phase) / setup.rate);
  const absl::Time now = absl::Now();
  if (at > now) absl::SleepFor(at - now);
  return at;
}

void StreamWorker(const Setup& setup, int index, WorkerStats* s) {
  Client* client = setup.clients[index % setup.clients.size()];
  std::unique_ptr<NormalizeStream> stream =
      setup.echo ? client->OpenEchoStream() : client->OpenStream();
  v1::NormalizeRequest request = setup.request;
  v1::NormalizeResponse response;
  for (int64_t n = 0;; ++n) {
    const absl::Time start = NextSend(setup, index, n);
    if (start >= setup.end) break;
    request.set_id(absl::StrCat(index, "-", n));
    ++s->sent;
    const bool answered = stream->Write(request) && stream->Read(&response);
    const absl::StatusCode code = !answered ? stream->Finish().code()
                                  : response.has_error()
                                      ? static_cast<absl::StatusCode>(response.error().code())
                                      : absl::StatusCode::kOk;
    s->Record(code, answered ? &response : nullptr, request.id(),
              absl::ToInt64Microseconds(absl::Now() - start));
    if (!answered) return;
  }
  stream->Finish().IgnoreError();
}

int Run(const CliFlags& f) {
  absl::StatusOr<v1::NormalizeRequest> request = MakeRequest(f);
  absl::StatusOr<int64_t> concurrency = f.GetInt("concurrency", 1);
  absl::StatusOr<double> duration = f.GetDouble("duration", 5);
  absl::StatusOr<double> rate = f.GetDouble("rate", 0);
  absl::StatusOr<int64_t> timeout_ms = f.GetInt("timeout-ms", 30000);
  absl::StatusOr<int64_t> connections = f.GetInt("connections", 1);
  for (const absl::Status& s : {request.status(), concurrency.status(), duration.status(),
                                rate.status(), timeout_ms.status(), connections.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "normbench: %s\n%s", std::string(s.message()).c_str(), kUsage);
      return 2;
    }
  }
  if (*concurrency < 1 || *duration <= 0 || *rate < 0 || *timeout_ms < 1 || *connections < 1 ||
      *connections > 1024) {
    std::fprintf(stderr,
                 "normbench: --concurrency and --timeout-ms must be >= 1, --connections 1 to "
                 "1024, --duration > 0, --rate >= 0\n%s",
                 kUsage);
    return 2;
  }
  ClientOptions options;
  options.timeout = absl::Milliseconds(*timeout_ms);
  options.own_connection = true;
  ApplyCredentialFlags(f, &options);
  absl::StatusOr<int64_t> max_attempts = f.GetInt("max-attempts", options.retry.max_attempts);
  if (!max_attempts.ok() || *max_attempts < 1 || *max_attempts > 5) {
    std::fprintf(stderr, "normbench: --max-attempts: expected 1 to 5, got '%s'\n",
                 f.GetString("max-attempts").c_str());
    return 2;
  }
  options.retry.max_attempts = static_cast<int>(*max_attempts);
  Setup setup;
  std::vector<std::unique_ptr<Client>> clients;
  for (int64_t i = 0; i < *connections; ++i) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Create(f.GetString("target", "localhost:50051"), options);
    if (!client.ok()) {
      std::fprintf(stderr, "normbench: %s\n", client.status().ToString().c_str());
      return 1;
    }
    setup.clients.push_back(client->get());
    clients.push_back(*std::move(client));
  }
  setup.request = *std::move(request);
  setup.stream = f.GetBool("stream");
  setup.echo = f.GetBool("echo");
  setup.rate = *rate / static_cast<double>(*concurrency);
  setup.workers = *concurrency;
  std::vector<WorkerStats> stats(*concurrency);
  WorkerStats all;
  std::vector<std::thread> workers;
  const std::optional<absl::Duration> steal_before = MachineStealTime();
  setup.start = absl::Now();
  setup.end = setup.start + absl::Seconds(*duration);
  if (setup.rate > 0 && !setup.stream) {
    OpenLoopOptions open;
    open.rate = *rate;
    open.start = setup.start;
    open.end = setup.end;
    open.max_in_flight = *concurrency;
    open.echo = setup.echo;
    workers.emplace_back([&, open] { all = OpenLoop(setup.clients, setup.request, open); });
  } else if (setup.rate > 0) {
    for (int i = 0; i < *concurrency; ++i) {
      workers.emplace_back(StreamWorker, std::cref(setup), i, &stats[i]);
    }
  } else {
    ClosedLoopOptions closed;
    closed.callers = *concurrency;
    closed.end = setup.end;
    closed.stream = setup.stream;
    closed.echo = setup.echo;
    workers.emplace_back([&, closed] { all = ClosedLoop(setup.clients, setup.request, closed); });
  }
  for (auto& w : workers) w.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - setup.start);
  const int64_t steal_ms = StealMs(steal_before, MachineStealTime());

  for (const auto& s : stats) all.Merge(s);
  const std::vector<int64_t> every = all.AllLatencies();
  const double rps = all.ok / elapsed;
  std::vector<std::string> codes, by_code;
  for (const auto& [code, v] : all.latencies_us) {
    codes.push_back(absl::StrCat("\"", code, "\": ", v.size()));
    by_code.push_back(absl::StrCat("\"", code, "\": ", LatencyJson(v)));
  }
  const std::string json = absl::StrCat(
      "{\"op\": \"", setup.echo ? "echo" : f.GetString("op", "rms-norm"), "\", \"shape\": \"",
      f.GetString("shape", "1x4096"), "\", \"dtype\": \"", f.GetString("dtype", "f32"),
      "\", \"concurrency\": ", *concurrency, ", \"connections\": ", *connections,
      ", \"stream\": ", setup.stream ? "true" : "false", ", \"rate\": ", *rate,
      ", \"duration_s\": ", elapsed, ", \"requests_sent\": ", all.sent,
      ", \"requests_ok\": ", all.ok, ", \"requests_failed\": ", all.failed,
      ", \"requests_unanswered\": ", all.sent - all.ok - all.failed,
      ", \"wrong_id\": ", all.wrong_id, ", \"batched\": ", all.batched,
      ", \"throughput_rps\": ", rps, ", \"latency_us\": {\"p50\": ", Percentile(every, 0.5),
      ", \"p90\": ", Percentile(every, 0.9), ", \"p99\": ", Percentile(every, 0.99),
      ", \"max\": ", every.empty() ? 0 : every.back(),
      "}, \"send_late_us\": ", LatencyJson(all.send_late_us), ", \"latency_us_by_code\": {",
      absl::StrJoin(by_code, ", "), "}, \"status_codes\": {", absl::StrJoin(codes, ", "),
      "}, \"machine_steal_ms\": ", steal_ms, "}");
  std::printf("%s\n", json.c_str());
  if (const auto path = f.Find("json")) {
    std::ofstream(*path) << json << "\n";
  }
  return all.failed == 0 && all.wrong_id == 0 ? 0 : 1;
}

}  // namespace
}  // namespace normd

int main(int argc, char** argv) {
  std::map<std::string, bool> known = {
      {"target", false},  {"op", false},           {"shape", false},
      {"dtype", false},   {"concurrency", false},  {"duration", false},
      {"stream", true},   {"echo", true},          {"rate", false},
      {"backend", false}, {"timeout-ms", false},   {"connections", false},
      {"json", false},    {"max-attempts", false}, {"help", true}};
  normd::AddCredentialFlags(&known);
  normd::CliFlags flags(known);
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() || flags.GetBool("help")) {
    if (!s.ok()) std::fprintf(stderr, "normbench: %s\n", std::string(s.message()).c_str());
    std::fputs(normd::kUsage, stderr);
    std::fputs(normd::kCredentialUsage, stderr);
    return s.ok() ? 0 : 2;
  }
  normd::TuneProcessForMessages();
  return normd::Run(flags);
}
