// normd-rejection-bench: how fast a server with a full queue says no, beside the
// transport's physical limit (Echo) at the same offered rate, in one run.
//
// The server is a child process running the real server (real gRPC on loopback, real
// transport and scheduler) whose CPU backend sits behind a gate
// (gated_server_process.h); this process is the client and steers the gate over a
// pipe. They are separate processes, as normd and its callers are: in one process gRPC's
// pollers handle both sides' sockets on whichever thread polls.
// On this machine's CPU backend a queue fills only when the cores are saturated, and then
// every call, accepted, rejected or Echo, waits for the CPU; the gate holds the queue full
// while the cores are free, so what is measured is the rejection path itself:
//   1. Echo, open loop at --rate for --duration: the transport alone.
//   2. The gate closes, one request enters the backend and --queue requests fill the queue.
//   3. Normalize, open loop at the same rate: every call must be answered UNAVAILABLE.
//   4. The gate opens: the held requests must all be answered OK, with their own ids.
// Prints one JSON object with, for each phase, the latencies, the server's and the
// client's CPU time per call, and the machine's CPU steal (a phase whose cores the
// hypervisor took shows it); exits 1 when any call was lost, duplicated, answered with
// another id, or a rejection phase call was not UNAVAILABLE.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gated_server_process.h"
#include "grpcpp/completion_queue.h"
#include "normd/client.h"
#include "normd/common/cli_flags.h"
#include "normd/common/machine_steal.h"
#include "normd/common/process_tuning.h"
#include "normd/load/load_gen.h"
#include "spdlog/spdlog.h"

namespace normd {
namespace {

constexpr char kUsage[] =
    "usage: normd-rejection-bench [--rate 4000] [--duration 3] [--queue 8] [--cols 4096]\n"
    "                             [--connections 1]\n";

// One request held in the backend or the queue while the rejections are measured. Its
// answer arrives on the bench's own completion queue, polled by the main thread: a
// callback-API call would start gRPC 1.51's "nexting" threads, which poll this client's
// sockets too, and the rejection phase would pay for thread hops that the Echo phase
// does not.
struct HeldCall {
  std::string id;
  grpc::ClientContext context;
  v1::NormalizeResponse response;
  grpc::Status status;
  std::unique_ptr<Client::QueueReader> reader;
  bool answered = false;
};

// What one phase cost: the server's and the client's CPU time and the machine's steal.
class Phase {
 public:
  explicit Phase(bench::GatedServerProcess* srv)
      : srv_(srv),
        steal_(MachineStealTime()),
        server_cpu_us_(srv->GetStats().cpu_us),
        client_cpu_us_(bench::ProcessCpuUs()) {}
  void End() {
    client_cpu_us_ = bench::ProcessCpuUs() - client_cpu_us_;
    server_cpu_us_ = srv_->GetStats().cpu_us - server_cpu_us_;
    steal_ms_ = StealMs(steal_, MachineStealTime());
  }
  std::string Json(const LoadStats& s, double seconds) const {
    std::vector<std::string> by_code;
    for (const auto& [code, v] : s.by_code) {
      by_code.push_back(absl::StrCat("\"", code, "\": ", LatencyJson(v)));
    }
    const double calls = std::max<double>(1, s.ok + s.failed);
    return absl::StrCat(
        "{\"sent\": ", s.sent, ", \"ok\": ", s.ok, ", \"failed\": ", s.failed,
        ", \"unanswered\": ", s.sent - s.ok - s.failed, ", \"wrong_id\": ", s.wrong_id,
        ", \"answered_rps\": ", (s.ok + s.failed) / seconds,
        ", \"latency_us\": ", LatencyJson(s.latency_us), ", \"latency_us_by_code\": {",
        absl::StrJoin(by_code, ", "), "}, \"send_late_us\": ", LatencyJson(s.send_late_us),
        ", \"server_cpu_us_per_call\": ", server_cpu_us_ / calls,
        ", \"client_cpu_us_per_call\": ", client_cpu_us_ / calls,
        ", \"machine_steal_ms\": ", steal_ms_, "}");
  }

 private:
  bench::GatedServerProcess* srv_;
  std::optional<absl::Duration> steal_;
  int64_t server_cpu_us_, client_cpu_us_;
  int64_t steal_ms_ = -1;
};

int Run(const CliFlags& f) {
  absl::StatusOr<double> rate = f.GetDouble("rate", 4000);
  absl::StatusOr<double> duration = f.GetDouble("duration", 3);
  absl::StatusOr<int64_t> queue = f.GetInt("queue", 8);
  absl::StatusOr<int64_t> cols = f.GetInt("cols", 4096);
  absl::StatusOr<int64_t> connections = f.GetInt("connections", 1);
  for (const absl::Status& s :
       {rate.status(), duration.status(), queue.status(), cols.status(), connections.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "normd-rejection-bench: %s\n%s", std::string(s.message()).c_str(),
                   kUsage);
      return 2;
    }
  }
  if (*rate <= 0 || *duration <= 0 || *queue < 1 || *cols < 1 || *connections < 1) {
    std::fprintf(stderr, "normd-rejection-bench: every value must be positive\n%s", kUsage);
    return 2;
  }

  absl::StatusOr<bench::GatedServerProcess> srv = bench::GatedServerProcess::Start(*queue);
  if (!srv.ok()) {
    std::fprintf(stderr, "normd-rejection-bench: %s\n", srv.status().ToString().c_str());
    return 1;
  }
  const std::string target = absl::StrCat("127.0.0.1:", srv->port());
  ClientOptions copt;
  copt.own_connection = true;
  // Every rejection is measured as it comes: a retried UNAVAILABLE would time the retries.
  copt.retry.max_attempts = 1;
  std::vector<std::unique_ptr<Client>> owned;
  std::vector<Client*> clients;
  for (int64_t i = 0; i < *connections; ++i) {
    owned.push_back(*Client::Create(target, copt));
    clients.push_back(owned.back().get());
  }
  // One 1 x cols f32 RMSNorm request, as normbench sends.
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> values(*cols);
  for (float& v : values) v = dist(rng);
  RmsNormOptions rms;
  rms.backend = Backend::kCpu;
  const v1::NormalizeRequest request =
      MakeRequest(HostTensor::FromFloats(DType::kF32, {1, *cols}, values), rms);

  OpenLoopOptions open;
  open.rate = *rate;
  open.start = absl::Now();
  open.end = open.start + absl::Seconds(*duration);
  open.echo = true;
  Phase echo_phase(&*srv);
  const LoadStats echo = OpenLoop(clients, request, open);
  echo_phase.End();

  // Hold the queue full: one request inside the gated backend, `queue` behind it.
  srv->Close();
  grpc::CompletionQueue held_cq;
  std::vector<std::unique_ptr<HeldCall>> held(*queue + 1);
  // Polling the queue also moves this client's I/O (flow-control updates) while the
  // held requests are sent.
  const auto poll_held = [&held_cq](absl::Duration d) {
    void* tag;
    bool ok;
    while (held_cq.AsyncNext(&tag, &ok, absl::ToChronoTime(absl::Now() + d)) ==
           grpc::CompletionQueue::GOT_EVENT) {
      static_cast<HeldCall*>(tag)->answered = true;
    }
  };
  const absl::Time fill_deadline = absl::Now() + absl::Seconds(10);
  for (size_t i = 0; i < held.size(); ++i) {
    auto call = std::make_unique<HeldCall>();
    v1::NormalizeRequest r = request;
    r.set_id(absl::StrCat("held-", i));
    call->id = r.id();
    call->reader = clients[0]->StartOnQueue(false, &call->context, r, &held_cq, &call->response,
                                            &call->status, call.get());
    held[i] = std::move(call);
    // The first must be inside the backend before the rest queue behind it.
    while (i == 0 && srv->Entered() < 1 && absl::Now() < fill_deadline) {
      poll_held(absl::Milliseconds(1));
    }
  }
  while (srv->GetStats().queued < *queue && absl::Now() < fill_deadline) {
    poll_held(absl::Milliseconds(1));
  }
  const bench::GatedServerProcess::Stats before = srv->GetStats();

  open.start = absl::Now();
  open.end = open.start + absl::Seconds(*duration);
  open.echo = false;
  Phase rejected_phase(&*srv);
  const LoadStats rejected = OpenLoop(clients, request, open);
  rejected_phase.End();
  const bench::GatedServerProcess::Stats after = srv->GetStats();

  srv->Open();
  int64_t answered = 0, ok = 0;
  const absl::Time answer_deadline = absl::Now() + absl::Seconds(30);
  const auto all_answered = [&held] {
    for (const auto& c : held) {
      if (!c->answered) return false;
    }
    return true;
  };
  while (!all_answered() && absl::Now() < answer_deadline) poll_held(absl::Milliseconds(10));
  for (const auto& c : held) {
    if (!c->answered) continue;
    ++answered;
    if (c->status.ok() && c->response.id() == c->id) ++ok;
  }
  // A call still open is cancelled, which answers it, before its context and the queue go.
  for (const auto& c : held) {
    if (!c->answered) c->context.TryCancel();
  }
  while (!all_answered()) poll_held(absl::Milliseconds(10));
  held_cq.Shutdown();
  poll_held(absl::Milliseconds(10));
  const int64_t unavailable =
      rejected.by_code.count("UNAVAILABLE") ? rejected.by_code.at("UNAVAILABLE").count() : 0;
  const bool good = echo.ok == echo.sent && echo.wrong_id == 0 && unavailable == rejected.sent &&
                    rejected.wrong_id == 0 && before.queued == *queue &&
                    ok == static_cast<int64_t>(held.size()) &&
                    after.rejected_full - before.rejected_full == rejected.sent;
  std::printf(
      "{\"rate\": %g, \"duration_s\": %g, \"queue\": %lld, \"cols\": %lld, \"connections\": "
      "%lld, \"echo\": %s, \"full_queue_normalize\": %s, \"queued_while_rejecting\": %lld, "
      "\"server_rejected_full\": %lld, \"held_answered\": %lld, \"held_ok\": %lld, \"held\": "
      "%lld, \"good\": %s}\n",
      *rate, *duration, static_cast<long long>(*queue), static_cast<long long>(*cols),
      static_cast<long long>(*connections), echo_phase.Json(echo, *duration).c_str(),
      rejected_phase.Json(rejected, *duration).c_str(), static_cast<long long>(before.queued),
      static_cast<long long>(after.rejected_full - before.rejected_full),
      static_cast<long long>(answered), static_cast<long long>(ok),
      static_cast<long long>(held.size()), good ? "true" : "false");
  // The connections close first: a server draining with a client that no longer reads
  // would wait out its drain timeout.
  held.clear();
  clients.clear();
  owned.clear();
  const int server_exit = srv->Quit();
  return good && server_exit == 0 ? 0 : 1;
}

}  // namespace
}  // namespace normd

int main(int argc, char** argv) {
  normd::CliFlags flags({{"rate", false},
                         {"duration", false},
                         {"queue", false},
                         {"cols", false},
                         {"connections", false},
                         {"help", true}});
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() || flags.GetBool("help")) {
    if (!s.ok())
      std::fprintf(stderr, "normd-rejection-bench: %s\n", std::string(s.message()).c_str());
    std::fputs(normd::kUsage, stderr);
    return s.ok() ? 0 : 2;
  }
  normd::TuneProcessForMessages();
  spdlog::set_level(spdlog::level::warn);  // stdout carries the JSON only
  return normd::Run(flags);
}
