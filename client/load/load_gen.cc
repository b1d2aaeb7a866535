#include "normd/load/load_gen.h"

#include <sys/prctl.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"

namespace normd {
namespace {

// What the callers of one ClosedLoop share.
struct LoopState {
  absl::Mutex mu;
  absl::CondVar stopped;
  LoadStats stats ABSL_GUARDED_BY(mu);
  int64_t running ABSL_GUARDED_BY(mu) = 0;
  v1::NormalizeRequest request;  // the template, read-only once callers start
  ClosedLoopOptions options;

  // Records one answer: its code and, when one came, the response; `id` is what was sent.
  void Answer(absl::StatusCode code, const v1::NormalizeResponse* r, const std::string& id,
              absl::Time sent) {
    const int64_t us = absl::ToInt64Microseconds(absl::Now() - sent);
    absl::MutexLock l(&mu);
    stats.Record(code, r, id, us);
  }
  void Stop() {
    absl::MutexLock l(&mu);
    --running;
    stopped.Signal();
  }
};

// A unary caller: sends request n, and n + 1 from the answer's callback.
void SendUnary(std::shared_ptr<LoopState> st, Client* client, int64_t caller, int64_t n) {
  if (absl::Now() >= st->options.end) {
    st->Stop();
    return;
  }
  v1::NormalizeRequest r = st->request;
  r.set_id(absl::StrCat(caller, "-", n));
  {
    absl::MutexLock l(&st->mu);
    ++st->stats.sent;
  }
  auto done = [st, client, caller, n, id = r.id(),
               sent = absl::Now()](absl::StatusOr<v1::NormalizeResponse> a) {
    st->Answer(a.status().code(), a.ok() ? &*a : nullptr, id, sent);
    SendUnary(st, client, caller, n + 1);
  };
  if (st->options.echo) {
    client->EchoAsync(std::move(r), std::move(done));
  } else {
    client->NormalizeAsync(std::move(r), std::move(done));
  }
}

// A streaming caller: one request in flight on its stream; the next is written when the
// answer is read and the previous write has completed (gRPC allows one write at a time).
// Decisions are made under mu_, the gRPC calls after it is released.
class StreamCaller final : public Client::StreamReactor {
 public:
  StreamCaller(std::shared_ptr<LoopState> st, Client* client, int64_t caller)
      : st_(std::move(st)), caller_(caller) {
    request_ = st_->request;
    client->BindStreamAsync(&context_, this, st_->options.echo);
    {
      absl::MutexLock l(&mu_);
      Prepare();
    }
    Issue();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    After next = kNothing;
    {
      absl::MutexLock l(&mu_);
      writing_ = false;
      if (ok && after_write_ == kSend) {
        Prepare();
        next = kSend;
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
    st_->Answer(response_.has_error() ? static_cast<absl::StatusCode>(response_.error().code())
                                      : absl::StatusCode::kOk,
                &response_, request_.id(), sent_);
    const bool stop = absl::Now() >= st_->options.end;
    bool send = false, close = false;
    {
      absl::MutexLock l(&mu_);
      answered_ = true;
      if (writing_) {
        after_write_ = stop ? kClose : kSend;
      } else if (stop) {
        close = true;
      } else {
        Prepare();
        send = true;
      }
    }
    if (send) Issue();
    if (close) StartWritesDone();
  }

  void OnDone(const grpc::Status& s) override {
    if (!answered_) {  // the request in flight died with the stream
      st_->Answer(
          s.ok() ? absl::StatusCode::kUnknown : static_cast<absl::StatusCode>(s.error_code()),
          nullptr, request_.id(), sent_);
    }
    // The context (and with it this stream's reference to the channel) goes first: once
    // Stop lets ClosedLoop return, the caller may destroy the Client, and the channel's
    // last reference must not be dropped on this gRPC thread (see Client::CallAsync).
    std::shared_ptr<LoopState> st = std::move(st_);
    delete this;
    st->Stop();
  }

 private:
  enum After { kNothing, kSend, kClose };

  // The next request: its id, its send time, and the counters.
  void Prepare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    request_.set_id(absl::StrCat(caller_, "-", n_++));
    {
      absl::MutexLock l(&st_->mu);
      ++st_->stats.sent;
    }
    sent_ = absl::Now();
    answered_ = false;
    writing_ = true;
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
  v1::NormalizeRequest request_;
  v1::NormalizeResponse response_;
  absl::Time sent_;
  bool answered_ = true;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  After after_write_ ABSL_GUARDED_BY(mu_) = kNothing;
};

}  // namespace

LoadStats ClosedLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                     const ClosedLoopOptions& options) {
  auto st = std::make_shared<LoopState>();
  st->request = request;
  st->options = options;
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
  return std::move(st->stats);
}

LoadStats OpenLoop(const std::vector<Client*>& clients, const v1::NormalizeRequest& request,
                   const OpenLoopOptions& options) {
  // One thread sends, polls the completion queue and records: no gRPC thread is woken per
  // answer and nothing is locked. gRPC's poller waits in whole milliseconds, far coarser
  // than the gap between sends, so this thread sleeps at most kPollGap at a time and then
  // takes every answer that came in the meantime without waiting: an answer is timed up
  // to kPollGap (plus the sleep's own overshoot) after it arrived, which counts against
  // it. A receiver thread blocking on the queue would time answers exactly, but its
  // wake-up per answer cost about 75 instead of 60 us of client CPU per call at 10000
  // calls/s on the 2-core VM, and on the shared cores the p99 then came out 1.5-2.3 ms
  // instead of 0.6-1.2 ms.
  constexpr absl::Duration kPollGap = absl::Microseconds(100);
  struct Call {
    grpc::ClientContext context;
    v1::NormalizeResponse response;
    grpc::Status status;
    std::unique_ptr<Client::QueueReader> reader;
    std::string id;
    absl::Time at;
  };
  // Linux lets a sleeping thread's wake-up slip by its timer slack (50 us by default) so
  // that wake-ups can be merged; here that slip would add to every answer's timing and
  // to every send's lateness. Slack of 1 ns while the loop runs; restored after.
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
  LoadStats stats;
  grpc::CompletionQueue cq;
  int64_t in_flight = 0;
  const auto take = [&](void* tag) {
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    const int64_t us = absl::ToInt64Microseconds(absl::Now() - call->at);
    const absl::StatusCode code = static_cast<absl::StatusCode>(call->status.error_code());
    stats.Record(code, call->status.ok() ? &call->response : nullptr, call->id, us);
    --in_flight;
  };
  // Takes every answer already there; true if any.
  const auto poll = [&] {
    bool any = false;
    void* tag;
    bool ok;
    while (cq.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
           grpc::CompletionQueue::GOT_EVENT) {
      take(tag);
      any = true;
    }
    return any;
  };
  v1::NormalizeRequest next = request;
  for (int64_t n = 0;; ++n) {
    const absl::Time at = options.start + absl::Seconds(static_cast<double>(n) / options.rate);
    if (at >= options.end) break;
    for (;;) {
      poll();
      const absl::Time now = absl::Now();
      if (in_flight >= options.max_in_flight) {
        absl::SleepFor(kPollGap);
      } else if (at > now) {
        absl::SleepFor(std::min(at - now, kPollGap));
      } else {
        break;
      }
    }
    stats.send_late_us.push_back(absl::ToInt64Microseconds(absl::Now() - at));
    ++stats.sent;
    ++in_flight;
    next.set_id(absl::StrCat(n));
    auto* call = new Call;
    call->id = next.id();
    call->at = at;
    call->reader = clients[n % clients.size()]->StartOnQueue(
        options.echo, &call->context, next, &cq, &call->response, &call->status, call);
  }
  void* tag;
  bool ok;
  while (in_flight > 0 && cq.Next(&tag, &ok)) take(tag);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, old_slack, 0, 0, 0);
  return stats;
}

}  // namespace normd
