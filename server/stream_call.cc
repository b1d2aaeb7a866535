// The NormalizeStream / EchoStream calls on the completion-queue API (see calls.h).
#include <atomic>
#include <deque>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/support/async_stream.h"
#include "server/answer_wire.h"
#include "server/calls.h"
#include "server/cq_event.h"
#include "server/request_log.h"
#include "server/status_map.h"

namespace normd::server {

namespace {

using Request = v1::NormalizeRequest;
using Response = v1::NormalizeResponse;

class StreamCall final {
 public:
  StreamCall(const Listener& at, bool echo)
      : live_(at.env->live_calls), at_(at), env_(*at.env), echo_(echo) {
    context_.AsyncNotifyWhenDone(&done_event_);  // before the call starts, as gRPC asks
    if (echo) {
      at.diagnostics->RequestEchoStream(&context_, &stream_, at.cq, at.cq, &started_event_);
    } else {
      at.service->RequestNormalizeStream(&context_, &stream_, at.cq, at.cq, &started_event_);
    }
  }

 private:
  // gRPC's events, on the transport thread.
  void Started(bool ok) {
    if (!ok) {  // shutting down, never matched: nothing more will be reported
      delete this;
      return;
    }
    new StreamCall(at_, echo_);
    deadline_ = CallDeadline(context_);
    if (env_.auth != nullptr) {
      if (absl::Status st = env_.auth->Check(context_); !st.ok()) {
        if (env_.metrics != nullptr)
          env_.metrics->RecordRejection(metrics::Rejection::kUnauthenticated);
        {
          absl::MutexLock l(&mu_);
          finished_ = true;
        }
        Finish(ToGrpcStatus(st));
        return;
      }
    }
    absl::MutexLock l(&mu_);
    reading_ = true;
    next_ = std::make_unique<Slot>();
    StartRead();
  }
  void Finished(bool) {
    // The acquire pairs with Finish's release (see there).
    finish_reported_ = finish_called_.load(std::memory_order_acquire);
    if (done_reported_) delete this;
  }
  void Done(bool) {
    done_reported_ = true;
    if (context_.IsCancelled()) OnCancel();
    if (finish_reported_) delete this;
  }

  void StartRead() { stream_.Read(&read_buffer_, &read_event_); }
  // The response's large outputs move into the message (answer_wire.h).
  void StartWrite(Response* response) { stream_.Write(SerializeAnswer(response), &write_event_); }
  void Finish(const grpc::Status& status) {
    // The thread that decides to finish (a scheduler worker, when the last answer
    // completes after the client left) hands the call to the transport thread that deletes
    // it through gRPC's completion queue, which ThreadSanitizer cannot see into
    // (uninstrumented gRPC): this release, acquired in Finished, makes that handoff
    // visible (TSan reported the worker's last Recycle racing the delete, CI 2026-11-29).
    finish_called_.store(true, std::memory_order_release);
    stream_.Finish(status, &finished_event_);
  }

  void OnReadDone(bool ok) {
    Slot* slot = nullptr;
    {
      absl::MutexLock l(&mu_);
      if (ok && !broken_) slot = next_.get();
    }
    // Parsed outside the lock (the read side alone touches the slot being read), so that a
    // large message does not hold up the write side.
    if (slot != nullptr) {
      slot->start = absl::Now();
      // The memory budget before the copy (memory_budget.h); refused: this request's
      // answer carries RESOURCE_EXHAUSTED and the stream goes on.
      slot->parsed = ReserveFor(env_.memory, read_buffer_.Length(), &slot->memory);
      if (slot->parsed.ok()) {
        slot->parsed = ParseRequest(&read_buffer_, &slot->request);
      } else {
        read_buffer_.Clear();
        slot->request.Clear();
      }
    }
    {
      absl::MutexLock l(&mu_);
      if (broken_) {
        slot = nullptr;
      } else if (slot != nullptr) {
        slots_.push_back(std::move(next_));
      }
    }
    // reading_ is still set: the call cannot finish under Submit.
    if (slot != nullptr) Submit(slot);
    Advance([&] {
      reading_ = false;
      if (slot == nullptr) reads_done_ = true;
    });
  }

  void OnWriteDone(bool ok) {
    Advance([&] {
      writing_ = false;
      Recycle();
      if (!ok) broken_ = true;  // the client is gone: answer nothing more
    });
  }

  void OnCancel() {
    std::vector<uint64_t> ids;
    {
      absl::MutexLock l(&mu_);
      broken_ = true;
      ++busy_;
      cancelled_.store(true, std::memory_order_relaxed);
      for (const auto& s : slots_) {
        if (!s->ready && s->work_id != 0) ids.push_back(s->work_id);
      }
    }
    const absl::Status why = CancelReason(context_);
    for (uint64_t id : ids) env_.scheduler->Cancel(id, why);
    Advance([&] { --busy_; });
  }

  struct Slot {
    Request request;
    Response response;
    absl::Time start;
    MemoryBudget::Reservation memory;  // released once the response is written
    uint64_t work_id = 0;              // while in the scheduler
    bool submitting = false;           // Submit has not returned: not to be written yet
    bool ready = false;                // response complete
    absl::Status parsed;               // of the message into `request`
  };

  // Answers `slot` at once (echo, bad request) or hands it to the scheduler.
  void Submit(Slot* slot) {
    if (!slot->parsed.ok()) {
      SetError(slot->parsed, slot);
      Record(slot, slot->parsed, nullptr);
      Advance([&] { slot->ready = true; });
      return;
    }
    if (echo_) {
      EchoInto(slot->request, &slot->response);
      Record(slot, absl::OkStatus(), nullptr);
      Advance([&] { slot->ready = true; });
      return;
    }
    absl::StatusOr<std::unique_ptr<Work>> work =
        MakeWork(env_, slot->request, &slot->response, deadline_, &cancelled_);
    if (work.ok()) {
      if (absl::Status s = slot->memory.Grow((*work)->bytes - slot->memory.bytes()); !s.ok()) {
        work = s;
      }
    }
    if (!work.ok()) {
      SetError(work.status(), slot);
      Record(slot, work.status(), nullptr);
      Advance([&] { slot->ready = true; });
      return;
    }
    {
      absl::MutexLock l(&mu_);
      ++pending_;
      slot->submitting = true;
    }
    (*work)->done = [this, slot](const absl::Status& status, const WorkResult& result) {
      // pending_ keeps the call (and the unwritten slot) alive until Advance.
      if (status.ok()) {
        SetTiming(result, slot->start, &slot->response);
      } else {
        SetError(status, slot);
      }
      Record(slot, status, &result);
      Advance([&] {
        --pending_;
        slot->work_id = 0;
        slot->ready = true;
      });
    };
    absl::StatusOr<uint64_t> id = env_.scheduler->Enqueue(*work);
    if (!id.ok()) {
      SetError(id.status(), slot);
      Record(slot, id.status(), nullptr);
    }
    bool cancel = false;
    Advance([&] {
      slot->submitting = false;
      if (!id.ok()) {
        --pending_;
        slot->ready = true;
      } else if (!slot->ready) {
        slot->work_id = *id;
        // Cancelled before the id was stored: take the work out ourselves. (Submit and
        // OnCancel both run on the transport thread today, so this is only a guard should
        // a queue ever get more than one thread.) busy_ keeps the call alive until then.
        if (cancelled_.load(std::memory_order_relaxed)) {
          cancel = true;
          ++busy_;
        }
      }
    });
    if (cancel) {
      env_.scheduler->Cancel(*id, CancelReason(context_));
      Advance([&] { --busy_; });
    }
  }

  // The written (or abandoned) front slot goes back for the next read: its messages keep
  // their buffers, so the next request parses into, and the next response is written
  // into, memory already allocated and touched (fresh 16 KiB buffers per message were
  // malloc and page-fault work on every message).
  void Recycle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::unique_ptr<Slot> done = std::move(slots_.front());
    slots_.pop_front();
    done->memory.Release();
    if (spare_.size() < 2) spare_.push_back(std::move(done));
  }
  std::unique_ptr<Slot> NewSlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (spare_.empty()) return std::make_unique<Slot>();
    std::unique_ptr<Slot> slot = std::move(spare_.back());
    spare_.pop_back();
    slot->response.Clear();  // keeps the output's buffer; the read clears the request
    slot->work_id = 0;
    slot->submitting = false;
    slot->ready = false;
    return slot;
  }

  // The slot's request is answered: metrics and access log (request_log.h).
  void Record(Slot* slot, const absl::Status& status, const WorkResult* result) {
    RecordAnswer(env_.metrics,
                 {&slot->request, &slot->response, status, result, slot->start, echo_},
                 [this] { return context_.peer(); });
  }

  static void SetError(const absl::Status& status, Slot* slot) {
    slot->response.Clear();
    slot->response.set_id(slot->request.id());
    ToRpcStatus(status, slot->response.mutable_error());
  }

  // Applies `mutate` and decides, in the same critical section, on the next write, the
  // next read, or Finish; the calls are made after the lock is released. Whoever changes
  // the state last makes the decision, so exactly one thread calls Finish, and no thread
  // touches the call after its change unless its own decision keeps the call alive.
  template <class Mutate>
  void Advance(Mutate mutate) {
    Response* write = nullptr;
    bool read = false;
    bool finish = false;
    grpc::Status status;
    {
      absl::MutexLock l(&mu_);
      mutate();
      if (finished_) return;
      auto writable = [&] {
        return !slots_.empty() && slots_.front()->ready && !slots_.front()->submitting;
      };
      if (broken_) {
        // Answered slots that will never be written.
        while (!writing_ && writable()) Recycle();
      } else if (!writing_ && writable()) {
        writing_ = true;
        write = &slots_.front()->response;
      }
      if (!reading_ && !reads_done_ && !broken_ &&
          static_cast<int>(slots_.size()) < env_.options.stream_window) {
        reading_ = true;
        next_ = NewSlot();
        read = true;
      }
      const bool idle = !reading_ && !writing_ && pending_ == 0 && busy_ == 0;
      if (idle && (reads_done_ || broken_) && (slots_.empty() || broken_)) {
        finished_ = true;
        finish = true;
        status = cancelled_.load() ? grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled")
                                   : grpc::Status::OK;
      }
    }
    if (write != nullptr) StartWrite(write);
    if (read) StartRead();
    if (finish) Finish(status);
  }

  LiveCalls::Token live_;  // first: released last (live_calls.h)
  const Listener at_;
  const CallEnv& env_;
  const bool echo_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{&context_};
  grpc::ByteBuffer read_buffer_;  // the read in progress; parsed into its slot's request
  absl::Time deadline_;           // set when the call arrives, before any Submit
  CqEvent started_event_ = MakeEvent<&StreamCall::Started>(this);
  CqEvent read_event_ = MakeEvent<&StreamCall::OnReadDone>(this);
  CqEvent write_event_ = MakeEvent<&StreamCall::OnWriteDone>(this);
  CqEvent finished_event_ = MakeEvent<&StreamCall::Finished>(this);
  CqEvent done_event_ = MakeEvent<&StreamCall::Done>(this);
  bool finish_reported_ = false, done_reported_ = false;  // transport thread only
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> finish_called_{false};  // see Finish

  absl::Mutex mu_;
  std::deque<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);   // request order
  std::unique_ptr<Slot> next_ ABSL_GUARDED_BY(mu_);                // the read in progress
  std::vector<std::unique_ptr<Slot>> spare_ ABSL_GUARDED_BY(mu_);  // written, for reuse
  int pending_ ABSL_GUARDED_BY(mu_) = 0;                           // Works in the scheduler
  int busy_ ABSL_GUARDED_BY(mu_) = 0;  // threads using the call outside the lock
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

void ListenStreams(const Listener& at) {
  for (int i = 0; i < 4; ++i) {
    new StreamCall(at, /*echo=*/false);
    if (at.diagnostics != nullptr) new StreamCall(at, /*echo=*/true);
  }
}

}  // namespace normd::server
