#include "normd/load/load_gen.h"

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

namespace normd {

namespace {

// What decides, per send, whether a run goes on.
class RunControl {
 public:
  RunControl(const Workload& workload, LoadRecorder* recorder, absl::Time end,
             const std::atomic<bool>* stop)
      : workload_(workload), recorder_(recorder), end_(end), stop_(stop) {}
  // The sequence number of the next request, and in `phase` the recorder's phase it
  // belongs to; -1 when the run is over.
  int64_t Claim(int* phase) {
    if (Over()) return -1;
    *phase = recorder_->Sent();
    if (*phase < 0) {
      limited_.store(true, std::memory_order_relaxed);
      return -1;
    }
    return sends_.fetch_add(1, std::memory_order_relaxed);
  }
  bool Over() const {
    return (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) || absl::Now() >= end_ ||
           limited_.load(std::memory_order_relaxed);
  }
  const Workload& workload() const { return workload_; }
  LoadRecorder* recorder() const { return recorder_; }

 private:
  const Workload& workload_;
  LoadRecorder* const recorder_;
  const absl::Time end_;
  const std::atomic<bool>* const stop_;
  std::atomic<int64_t> sends_{0};
  std::atomic<bool> limited_{false};  // the recorder's limit was reached
};

// What the callers of one ClosedLoop share.
struct LoopState {
  LoopState(const Workload& workload, LoadRecorder* recorder, const ClosedLoopOptions& o)
      : control(workload, recorder, o.end, o.stop), options(o) {}
  RunControl control;
  ClosedLoopOptions options;
  absl::Mutex mu;
  absl::CondVar stopped;
  int64_t running ABSL_GUARDED_BY(mu) = 0;

  void Stop() {
    absl::MutexLock l(&mu);
    --running;
    stopped.Signal();
  }
};

Answer MakeAnswer(absl::StatusCode code, const v1::NormalizeResponse* r, std::string id,
                  absl::Time sent, const CallInfo& info) {
  Answer a;
  a.code = code;
  a.response = r;
  a.sent_id = std::move(id);
  a.latency_us = absl::ToInt64Microseconds(absl::Now() - sent);
  a.peer = info.peer;
  a.previous_attempts = info.previous_attempts;
  return a;
}

// A unary caller: sends a request, and the next from the answer's callback.
void SendUnary(std::shared_ptr<LoopState> st, Client* client, int64_t caller, int64_t k) {
  int phase;
  const int64_t n = st->control.Claim(&phase);
  if (n < 0) {
    st->Stop();
    return;
  }
  const WorkItem& item = st->control.workload().Pick(static_cast<uint64_t>(n));
  v1::NormalizeRequest r = item.request;
  r.set_id(absl::StrCat(caller, "-", k));
  auto done = [st, client, caller, k, &item, phase, id = r.id(), sent = absl::Now()](
                  absl::StatusOr<v1::NormalizeResponse> a, const CallInfo& info) {
    st->control.recorder()->Record(
        phase, item, MakeAnswer(a.status().code(), a.ok() ? &*a : nullptr, id, sent, info));
    SendUnary(st, client, caller, k + 1);
  };
  if (st->options.echo) {
    client->EchoAsync(std::move(r), Client::InfoCallback(std::move(done)));
  } else {
    client->NormalizeAsync(std::move(r), Client::InfoCallback(std::move(done)));
  }
}

// A streaming caller: one request in flight on its stream; the next is written when the
// answer is read and the previous write has completed (gRPC allows one write at a time).
// Decisions are made under mu_, the gRPC calls after it is released.
class StreamCaller final : public Client::StreamReactor {
 public:
  StreamCaller(std::shared_ptr<LoopState> st, Client* client, int64_t caller)
      : st_(std::move(st)), caller_(caller) {
    client->BindStreamAsync(&context_, this, st_->options.echo);
    bool send;
    {
      absl::MutexLock l(&mu_);
      send = Prepare();
    }
    if (send) {
      Issue();
    } else {
      StartWritesDone();
    }
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    After next = kNothing;
    {
      absl::MutexLock l(&mu_);
      writing_ = false;
      if (ok && after_write_ == kSend) {
        next = Prepare() ? kSend : kClose;
      } else if (ok && after_write_ == kClose) {
        next = kClose;
      }
      after_write_ = kNothing;
    }
    if (next == kSend) Issue();
    if (next == kClose) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone reports it
    // A stream answers a bad request in the response, not with the call's status.
    CallInfo info;
    info.peer = context_.peer();
    st_->control.recorder()->Record(
        phase_, *item_,
        MakeAnswer(response_.has_error() ? static_cast<absl::StatusCode>(response_.error().code())
                                         : absl::StatusCode::kOk,
                   &response_, request_.id(), sent_, info));
    bool send = false, close = false;
    {
      absl::MutexLock l(&mu_);
      answered_ = true;
      if (writing_) {
        after_write_ = st_->control.Over() ? kClose : kSend;
      } else if (Prepare()) {
        send = true;
      } else {
        close = true;
      }
    }
    if (send) Issue();
    if (close) StartWritesDone();
  }

  void OnDone(const grpc::Status& s) override {
    if (!answered_) {  // the request in flight died with the stream
      st_->control.recorder()->Record(
          phase_, *item_,
          MakeAnswer(
              s.ok() ? absl::StatusCode::kUnknown : static_cast<absl::StatusCode>(s.error_code()),
              nullptr, request_.id(), sent_, CallInfo{}));
    }
    // The context (and with it this stream's reference to the channel) goes first: once
    // Stop lets ClosedLoop return, the caller may destroy the Client, and the channel's
    // last reference must not be dropped on this gRPC thread (see Client::StartAsync).
    std::shared_ptr<LoopState> st = std::move(st_);
    delete this;
    st->Stop();
  }

 private:
  enum After { kNothing, kSend, kClose };

  // The next request: its kind, id, send time, and the counters; false when the run is
  // over (nothing prepared).
  bool Prepare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t n = st_->control.Claim(&phase_);
    if (n < 0) return false;
    item_ = &st_->control.workload().Pick(static_cast<uint64_t>(n));
    request_ = item_->request;
    request_.set_id(absl::StrCat(caller_, "-", k_++));
    sent_ = absl::Now();
    answered_ = false;
    writing_ = true;
    return true;
  }
  void Issue() {
    StartWrite(&request_);
    StartRead(&response_);
  }

  std::shared_ptr<LoopState> st_;
  const int64_t caller_;
  grpc::ClientContext context_;
  absl::Mutex mu_;
  // Changed only by Prepare, while no write or read is in flight.
  const WorkItem* item_ = nullptr;
  v1::NormalizeRequest request_;
  v1::NormalizeResponse response_;
  absl::Time sent_;
  int phase_ = 0;
  bool answered_ = true;
  int64_t k_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  After after_write_ ABSL_GUARDED_BY(mu_) = kNothing;
};

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

// One request, every answer of `run` measured.
template <class Run>
LoadStats MeasureOne(const v1::NormalizeRequest& request, Run run) {
  const Workload workload = Workload::Of(request);
  LoadRecorder recorder;
  recorder.BeginMeasurement();
  run(workload, &recorder);
  return recorder.Take();
}

}  // namespace

void ClosedLoop(const std::vector<Client*>& clients, const Workload& workload,
                LoadRecorder* recorder, const ClosedLoopOptions& options) {
  auto st = std::make_shared<LoopState>(workload, recorder, options);
  {
    absl::MutexLock l(&st->mu);
    st->running = options.callers;
  }
  for (int64_t i = 0; i < options.callers; ++i) {
    Client* client = clients[i % clients.size()];
    if (options.stream) {
      new StreamCaller(st, client, i);  // deletes itself in OnDone
    } else {
      SendUnary(st, client, i, 0);
    }
  }
  absl::MutexLock l(&st->mu);
  while (st->running > 0) st->stopped.Wait(&st->mu);
}

LoadStats ClosedLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                     const ClosedLoopOptions& options) {
  return MeasureOne(
      request, [&](const Workload& w, LoadRecorder* r) { ClosedLoop(clients, w, r, options); });
}

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
  // sends, so this thread sleeps at most kPollGap at a time and then takes every answer
  // that came in the meantime without waiting: an answer is timed up to kPollGap (plus the
  // sleep's own overshoot) after it arrived, which counts against it. A receiver thread
  // blocking on the queue would time answers exactly, but its wake-up per answer cost
  // about 75 instead of 60 us of client CPU per call at 10000 calls/s on the 2-core VM,
  // and on the shared cores the p99 then came out 1.5-2.3 ms instead of 0.6-1.2 ms.
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
  };
  const auto chunked = std::make_shared<Chunked>();
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
        absl::SleepFor(kPollGap);
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
