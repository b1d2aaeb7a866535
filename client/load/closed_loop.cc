// The closed loop (load_gen.h): each caller sends its next request from the previous
// one's answer, on gRPC's callback API, unary or on a stream.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "normd/load/load_gen.h"
#include "run_control.h"

namespace normd {

namespace {

using load_internal::MakeAnswer;
using load_internal::MeasureOne;
using load_internal::RunControl;

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

}  // namespace normd
