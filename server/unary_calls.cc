// The unary NormService calls on the completion-queue API (see calls.h).
#include <atomic>

#include "absl/time/clock.h"
#include "grpcpp/support/async_unary_call.h"
#include "server/answer_wire.h"
#include "server/calls.h"
#include "server/cq_event.h"
#include "server/norm_service.h"
#include "server/request_log.h"
#include "server/status_map.h"

namespace normd::server {

absl::Time CallDeadline(const grpc::ServerContext& context) {
  const auto d = context.deadline();
  if (d == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(d);
}

absl::Status CancelReason(const grpc::ServerContext& context) {
  if (absl::Now() >= CallDeadline(context)) {
    return absl::DeadlineExceededError("deadline passed while queued");
  }
  return absl::CancelledError("request cancelled by the client while queued");
}

namespace {

// One unary call of `Req` -> `Resp`: waits to be matched, then Handle() runs on the
// transport thread and must lead to exactly one Finish, from any thread.
template <class Req, class Resp>
class UnaryCall {
 public:
  virtual ~UnaryCall() = default;

 protected:
  // `request_fn` is the generated AsyncService's RequestMethod, a member of `service` or
  // of one of its bases.
  template <class Service, class RequestFn>
  UnaryCall(const Listener& at, Service* service, RequestFn request_fn)
      : live_(at.env->live_calls), at_(at) {
    context_.AsyncNotifyWhenDone(&done_event_);  // before the call starts, as gRPC asks
    (service->*request_fn)(&context_, &request_, &responder_, at.cq, at.cq, &started_event_);
  }
  virtual void Relisten() = 0;  // arms the next listener for this method
  virtual void Handle() = 0;
  // A call without an accepted bearer token (auth.h): answered with `status` instead of
  // Handle. Calls that record their answers override it.
  virtual void Reject(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  virtual void OnCancel() {}

  void Finish(const grpc::Status& status) {
    // gRPC tells a retried attempt's server how many attempts came before
    // (grpc-previous-rpc-attempts) but not the client: returned as a trailer, so that the
    // client (CallInfo::previous_attempts) and normbench can count retries.
    const auto& metadata = context_.client_metadata();
    if (auto it = metadata.find("grpc-previous-rpc-attempts"); it != metadata.end()) {
      context_.AddTrailingMetadata("normd-previous-rpc-attempts",
                                   std::string(it->second.data(), it->second.size()));
    }
    // The thread that finishes a call (an executor, for Normalize) hands it to the
    // transport thread that deletes it through gRPC's completion queue, which
    // ThreadSanitizer cannot see into (uninstrumented gRPC): this release, acquired in
    // Finished, makes that handoff visible (TSan reported the answer's last read on the
    // executor racing its delete, CI 2026-11-24).
    finish_called_.store(true, std::memory_order_release);
    responder_.Finish(response_, status, &finished_event_);
  }

  LiveCalls::Token live_;  // first: released last (live_calls.h)
  const Listener at_;
  grpc::ServerContext context_;
  Req request_;
  Resp response_;

 private:
  void Started(bool ok) {
    // Not ok: the server is shutting down and this listener was never matched; gRPC will
    // report nothing more for it.
    if (!ok) {
      delete this;
      return;
    }
    Relisten();
    if (at_.env->auth != nullptr) {
      if (absl::Status s = at_.env->auth->Check(context_); !s.ok()) {
        Reject(s);
        return;
      }
    }
    Handle();
  }
  void Finished(bool) {
    // Always true here (gRPC reports a finish only after Finish); the acquire pairs with
    // Finish's release.
    finished_ = finish_called_.load(std::memory_order_acquire);
    if (done_) delete this;
  }
  void Done(bool) {
    done_ = true;
    if (context_.IsCancelled()) OnCancel();
    if (finished_) delete this;
  }

  grpc::ServerAsyncResponseWriter<Resp> responder_{&context_};
  CqEvent started_event_ = MakeEvent<&UnaryCall::Started>(this);
  CqEvent finished_event_ = MakeEvent<&UnaryCall::Finished>(this);
  CqEvent done_event_ = MakeEvent<&UnaryCall::Done>(this);
  bool finished_ = false, done_ = false;  // transport thread only
  std::atomic<bool> finish_called_{false};
};

// A raw method (calls.h): the call parses its request and serializes its answer itself.
class NormalizeCall final : public UnaryCall<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit NormalizeCall(const Listener& at)
      : UnaryCall(at, at.service, &AsyncService::RequestNormalize) {}

 private:
  void Relisten() override { new NormalizeCall(at_); }

  void Handle() override {
    start_ = absl::Now();
    const CallEnv& env = *at_.env;
    // The memory budget first, before the message is copied into message_ (memory_budget.h).
    if (absl::Status s = ReserveFor(env.memory, request_.Length(), &memory_); !s.ok()) {
      Answer(s, nullptr);
      return;
    }
    if (absl::Status s = ParseRequest(&request_, &message_); !s.ok()) {
      Answer(s, nullptr);
      return;
    }
    absl::StatusOr<std::unique_ptr<Work>> work =
        MakeWork(env, message_, &answer_, CallDeadline(context_), &cancelled_);
    if (!work.ok()) {
      Answer(work.status(), nullptr);
      return;
    }
    if (absl::Status s = memory_.Grow((*work)->bytes - memory_.bytes()); !s.ok()) {
      Answer(s, nullptr);
      return;
    }
    (*work)->done = [this](const absl::Status& status, const WorkResult& result) {
      if (status.ok()) SetTiming(result, start_, &answer_);
      Answer(status, &result);
    };
    // The call stays alive until this thread has returned: its finish is reported on
    // this thread's queue.
    absl::StatusOr<uint64_t> id = env.scheduler->Enqueue(*work);
    if (!id.ok()) {
      Answer(id.status(), nullptr);
      return;
    }
    work_id_.store(*id);
  }

  void Reject(const absl::Status& status) override {
    start_ = absl::Now();
    Answer(status, nullptr);
  }

  // Records the answer and finishes the call (the last touch of it: Finish may free it).
  void Answer(const absl::Status& status, const WorkResult* result) {
    if (!status.ok()) {
      answer_.Clear();  // partial outputs never travel with an error
      answer_.set_id(message_.id());
    }
    RecordAnswer(at_.env->metrics, {&message_, &answer_, status, result, start_, false},
                 [this] { return context_.peer(); });
    if (status.ok()) response_ = SerializeAnswer(&answer_);
    Finish(ToGrpcStatus(status));
  }

  void OnCancel() override {
    // Runs after Handle on the same thread, so the id is there if the work was queued;
    // Cancel ignores an id that is no longer queued.
    cancelled_.store(true);
    if (const uint64_t id = work_id_.load(); id != 0) {
      at_.env->scheduler->Cancel(id, CancelReason(context_));
    }
  }

  MemoryBudget::Reservation memory_;    // released when the call is deleted (answer sent)
  v1::NormalizeRequest message_;        // request_, parsed
  v1::NormalizeResponse answer_;        // serialized into response_ when answered
  std::atomic<bool> cancelled_{false};  // read by the scheduler's executors
  std::atomic<uint64_t> work_id_{0};
  absl::Time start_;  // when the request was received
};

class EchoCall final : public UnaryCall<v1::NormalizeRequest, v1::NormalizeResponse> {
 public:
  explicit EchoCall(const Listener& at)
      : UnaryCall(at, at.diagnostics, &DiagnosticsAsyncService::RequestEcho) {}

 private:
  void Relisten() override { new EchoCall(at_); }
  // The message and its copy count against the memory budget like any request's: a load
  // test of Echo alone must not take normd past --max-memory either.
  void Handle() override { Answer(ReserveFor(at_.env->memory, request_.ByteSizeLong(), &memory_)); }
  void Reject(const absl::Status& status) override { Answer(status); }

  void Answer(const absl::Status& status) {
    const absl::Time start = absl::Now();
    if (status.ok()) EchoInto(request_, &response_);
    RecordAnswer(at_.env->metrics, {&request_, &response_, status, nullptr, start, true},
                 [this] { return context_.peer(); });
    Finish(ToGrpcStatus(status));
  }

  MemoryBudget::Reservation memory_;  // released when the call is deleted (answer sent)
};

class ServerInfoCall final : public UnaryCall<v1::GetServerInfoRequest, v1::GetServerInfoResponse> {
 public:
  explicit ServerInfoCall(const Listener& at)
      : UnaryCall(at, at.service, &AsyncService::RequestGetServerInfo) {}

 private:
  void Relisten() override { new ServerInfoCall(at_); }
  void Handle() override {
    FillServerInfo(*at_.env, &response_);
    Finish(grpc::Status::OK);
  }
};

class DeepNormCall final
    : public UnaryCall<v1::GetDeepNormCoefficientsRequest, v1::GetDeepNormCoefficientsResponse> {
 public:
  explicit DeepNormCall(const Listener& at)
      : UnaryCall(at, at.service, &AsyncService::RequestGetDeepNormCoefficients) {}

 private:
  void Relisten() override { new DeepNormCall(at_); }
  void Handle() override { Finish(ToGrpcStatus(ComputeDeepNorm(request_, &response_))); }
};

// RegisterSharedMemory, UnregisterSharedMemory, SharedMemoryStatus: the registry's
// answers, or UNIMPLEMENTED where shared memory is off.
absl::Status SharedMemoryOff() {
  return absl::UnimplementedError(
      "shared memory is off on this server (--no-shared-memory): send tensors in `data`");
}

class RegisterSharedMemoryCall final
    : public UnaryCall<v1::RegisterSharedMemoryRequest, v1::RegisterSharedMemoryResponse> {
 public:
  explicit RegisterSharedMemoryCall(const Listener& at)
      : UnaryCall(at, at.service, &AsyncService::RequestRegisterSharedMemory) {}

 private:
  void Relisten() override { new RegisterSharedMemoryCall(at_); }
  void Handle() override {
    SharedMemoryRegistry* registry = at_.env->shared_memory;
    Finish(ToGrpcStatus(registry ? registry->Register(request_) : SharedMemoryOff()));
  }
};

class UnregisterSharedMemoryCall final
    : public UnaryCall<v1::UnregisterSharedMemoryRequest, v1::UnregisterSharedMemoryResponse> {
 public:
  explicit UnregisterSharedMemoryCall(const Listener& at)
      : UnaryCall(at, at.service, &AsyncService::RequestUnregisterSharedMemory) {}

 private:
  void Relisten() override { new UnregisterSharedMemoryCall(at_); }
  void Handle() override {
    SharedMemoryRegistry* registry = at_.env->shared_memory;
    Finish(ToGrpcStatus(registry ? registry->Unregister(request_.name()) : SharedMemoryOff()));
  }
};

class SharedMemoryStatusCall final
    : public UnaryCall<v1::SharedMemoryStatusRequest, v1::SharedMemoryStatusResponse> {
 public:
  explicit SharedMemoryStatusCall(const Listener& at)
      : UnaryCall(at, at.service, &AsyncService::RequestSharedMemoryStatus) {}

 private:
  void Relisten() override { new SharedMemoryStatusCall(at_); }
  void Handle() override {
    SharedMemoryRegistry* registry = at_.env->shared_memory;
    if (registry == nullptr) return Finish(ToGrpcStatus(SharedMemoryOff()));
    absl::StatusOr<v1::SharedMemoryStatusResponse> status = registry->Status(request_.name());
    if (status.ok()) response_ = *std::move(status);
    Finish(ToGrpcStatus(status.status()));
  }
};

}  // namespace

void ListenUnary(const Listener& at) {
  // Several listeners per method: calls that arrive together are matched at once instead
  // of waiting for the previous one's handler to arm the next.
  for (int i = 0; i < 16; ++i) {
    new NormalizeCall(at);
    if (at.diagnostics != nullptr) new EchoCall(at);
  }
  new ServerInfoCall(at);
  new DeepNormCall(at);
  new RegisterSharedMemoryCall(at);
  new UnregisterSharedMemoryCall(at);
  new SharedMemoryStatusCall(at);
}

}  // namespace normd::server
