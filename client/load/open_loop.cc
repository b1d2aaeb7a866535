// The open loop (load_gen.h): requests sent on a schedule whether or not earlier ones
// have been answered, from one thread polling a completion queue, or one thread per stream.
#include <sys/prctl.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "normd/load/load_gen.h"
#include "run_control.h"

namespace normd {

namespace {

using load_internal::MakeAnswer;
using load_internal::MeasureOne;
using load_internal::RunControl;

// The schedule of an open loop: request k at start + k / rate, or with exponential gaps.
class Schedule {
 public:
  Schedule(absl::Time start, double rate, bool poisson, uint64_t seed, double phase = 0)
      : next_(start + absl::Seconds(phase / rate)), rate_(rate), poisson_(poisson), rng_(seed) {}
  absl::Time Next() {
    const absl::Time at = next_;
    const double gap = poisson_ ? std::exponential_distribution<double>(rate_)(rng_) : 1 / rate_;
    next_ += absl::Seconds(gap);
    return at;
  }

 private:
  absl::Time next_;
  const double rate_;
  const bool poisson_;
  std::mt19937_64 rng_;
};

// Open loop on streams: one thread per stream, each with its share of the rate, phased
// so that sends do not come in bursts. A request that is due while the previous one is
// still in flight goes as soon as that is answered; its latency counts from when it was due.
void StreamWorker(RunControl* control, Client* client, const OpenLoopOptions& options, int index) {
  std::unique_ptr<NormalizeStream> stream =
      options.echo ? client->OpenEchoStream() : client->OpenStream();
  const double rate = options.rate / static_cast<double>(options.max_in_flight);
  Schedule schedule(options.start, rate, options.poisson, options.seed + index,
                    static_cast<double>(index) / static_cast<double>(options.max_in_flight));
  v1::NormalizeResponse response;
  for (int64_t k = 0;; ++k) {
    const absl::Time at = schedule.Next();
    if (at >= options.end) break;
    while (absl::Now() < at && !control->Over()) {  // a stop ends a long wait too
      absl::SleepFor(std::min(at - absl::Now(), absl::Milliseconds(50)));
    }
    int phase;
    const int64_t n = control->Claim(&phase);
    if (n < 0) break;
    const WorkItem& item = control->workload().Pick(static_cast<uint64_t>(n));
    v1::NormalizeRequest request = item.request;
    request.set_id(absl::StrCat(index, "-", k));
    control->recorder()->RecordLate(phase, absl::ToInt64Microseconds(absl::Now() - at));
    const bool answered = stream->Write(request) && stream->Read(&response);
    const absl::StatusCode code = !answered ? stream->Finish().code()
                                  : response.has_error()
                                      ? static_cast<absl::StatusCode>(response.error().code())
                                      : absl::StatusCode::kOk;
    control->recorder()->Record(
        phase, item,
        MakeAnswer(code, answered ? &response : nullptr, request.id(), at, CallInfo{}));
    if (!answered) return;
  }
  stream->Finish().IgnoreError();
}

}  // namespace

void OpenLoop(const std::vector<Client*>& clients, const Workload& workload, LoadRecorder* recorder,
              const OpenLoopOptions& options) {
  // The open loop ends by the schedule: a request due before `end` is sent, however late.
  RunControl control(workload, recorder, absl::InfiniteFuture(), options.stop);
  if (options.stream) {
    std::vector<std::thread> workers;
    for (int64_t i = 0; i < options.max_in_flight; ++i) {
      workers.emplace_back(StreamWorker, &control, clients[i % clients.size()], std::cref(options),
                           static_cast<int>(i));
    }
    for (std::thread& w : workers) w.join();
    return;
  }
  // One thread sends, polls the completion queue and records: no gRPC thread is woken per
  // answer. gRPC's poller waits in whole milliseconds, far coarser than the gap between
  // sends, so while a call is on the queue this thread sleeps at most kPollGap at a time and
  // then takes every answer that came in the meantime without waiting: an answer is timed
  // up to kPollGap (plus the sleep's own overshoot) after it arrived, which counts against
  // it. A receiver thread blocking on the queue would time answers exactly, but its wake-up
  // per answer cost about 75 instead of 60 us of client CPU per call at 10000 calls/s on
  // the 2-core VM, and on the shared cores the p99 then came out 1.5-2.3 ms instead of
  // 0.6-1.2 ms.
  constexpr absl::Duration kPollGap = absl::Microseconds(100);
  struct Call {
    grpc::ClientContext context;
    v1::NormalizeResponse response;
    grpc::Status status;
    std::unique_ptr<Client::QueueReader> reader;
    const WorkItem* item;
    std::string id;
    absl::Time at;
    int phase;
  };
  // Linux lets a sleeping thread's wake-up slip by its timer slack (50 us by default) so
  // that wake-ups can be merged; here that slip would add to every answer's timing and
  // to every send's lateness. Slack of 1 ns while the loop runs; restored after.
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
  grpc::CompletionQueue cq;
  int64_t in_flight = 0;  // on `cq`
  // Requests the client sends as row chunks (Client::Chunks: above its chunking threshold)
  // go through NormalizeAsync, since StartOnQueue sends whole: their answers are recorded
  // on gRPC's threads (the recorder takes its own lock), and a thread woken per answer is
  // nothing beside a call of a megabyte or more. Shared with the callbacks, which may
  // finish after this function has seen the count reach zero.
  struct Chunked {
    absl::Mutex mu;
    int64_t in_flight ABSL_GUARDED_BY(mu) = 0;
    int64_t limit = 0;  // options.max_in_flight
    bool Room() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight < limit; }
  };
  const auto chunked = std::make_shared<Chunked>();
  chunked->limit = options.max_in_flight;
  const auto chunked_in_flight = [&chunked] {
    absl::MutexLock l(&chunked->mu);
    return chunked->in_flight;
  };
  const auto take = [&](void* tag) {
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    const absl::StatusCode code = static_cast<absl::StatusCode>(call->status.error_code());
    recorder->Record(call->phase, *call->item,
                     MakeAnswer(code, call->status.ok() ? &call->response : nullptr, call->id,
                                call->at, Client::CallInfoOf(call->context)));
    --in_flight;
  };
  // Takes every answer already there.
  const auto poll = [&] {
    void* tag;
    bool ok;
    while (cq.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
           grpc::CompletionQueue::GOT_EVENT) {
      take(tag);
    }
  };
  // With no call on `cq` there is nothing to poll: the thread sleeps until kApproach before
  // the next send is due, or until a chunked call's answer makes room under max_in_flight,
  // waking at least every kIdleWait to see a stop; the last kApproach goes in kPollGap
  // steps as before. Polling every kPollGap throughout cost normbench 1.6 s of CPU in a 7 s
  // run of 4 MiB calls at 2 a second; sleeping straight to the send made it 140 us late
  // (a halted vCPU's wake-up) where the steps keep it at about 35 (BENCHMARKS.md, issue
  // 15, seventy-ninth session).
  constexpr absl::Duration kIdleWait = absl::Milliseconds(50);
  constexpr absl::Duration kApproach = absl::Milliseconds(1);
  Schedule schedule(options.start, options.rate, options.poisson, options.seed);
  for (;;) {
    const absl::Time at = schedule.Next();
    bool over = at >= options.end;
    while (!over) {
      poll();
      const absl::Time now = absl::Now();
      if (control.Over()) {
        over = true;
        break;
      }
      if (in_flight + chunked_in_flight() >= options.max_in_flight) {
        if (in_flight > 0) {
          absl::SleepFor(kPollGap);
        } else {
          absl::MutexLock l(&chunked->mu);
          chunked->mu.AwaitWithTimeout(absl::Condition(chunked.get(), &Chunked::Room), kIdleWait);
        }
      } else if (in_flight == 0 && at - now > kApproach) {
        absl::SleepFor(std::min(at - now - kApproach, kIdleWait));
      } else if (at > now) {
        absl::SleepFor(std::min(at - now, kPollGap));
      } else {
        break;
      }
    }
    int phase;
    const int64_t n = over ? -1 : control.Claim(&phase);
    if (n < 0) break;
    const WorkItem& item = workload.Pick(static_cast<uint64_t>(n));
    recorder->RecordLate(phase, absl::ToInt64Microseconds(absl::Now() - at));
    v1::NormalizeRequest next = item.request;
    next.set_id(absl::StrCat(n));
    Client* client = clients[n % clients.size()];
    if (!options.echo && client->Chunks(next)) {
      {
        absl::MutexLock l(&chunked->mu);
        ++chunked->in_flight;
      }
      std::string id = next.id();
      client->NormalizeAsync(
          std::move(next),
          Client::InfoCallback([chunked, recorder, &item, phase, id = std::move(id), at](
                                   absl::StatusOr<v1::NormalizeResponse> a, const CallInfo& info) {
            recorder->Record(phase, item,
                             MakeAnswer(a.status().code(), a.ok() ? &*a : nullptr, id, at, info));
            absl::MutexLock l(&chunked->mu);
            --chunked->in_flight;
          }));
      continue;
    }
    auto* call = new Call;
    call->item = &item;
    call->phase = phase;
    ++in_flight;
    call->id = next.id();
    call->at = at;
    call->reader = client->StartOnQueue(options.echo, &call->context, next, &cq, &call->response,
                                        &call->status, call);
  }
  void* tag;
  bool ok;
  while (in_flight > 0 && cq.Next(&tag, &ok)) take(tag);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  {
    absl::MutexLock l(&chunked->mu);
    chunked->mu.Await(absl::Condition(
        +[](int64_t* n) { return *n == 0; }, &chunked->in_flight));
  }
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, old_slack, 0, 0, 0);
}

LoadStats OpenLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                   const OpenLoopOptions& options) {
  return MeasureOne(request,
                    [&](const Workload& w, LoadRecorder* r) { OpenLoop(clients, w, r, options); });
}

}  // namespace normd
