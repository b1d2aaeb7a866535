// The unary Normalize call (see reactors.h).
#include <atomic>

#include "absl/time/clock.h"
#include "server/reactors.h"
#include "server/status_map.h"
#include "spdlog/spdlog.h"

namespace normd::server {

absl::Time CallDeadline(const grpc::CallbackServerContext& context) {
  const auto d = context.deadline();
  if (d == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(d);
}

absl::Status CancelReason(const grpc::CallbackServerContext& context) {
  if (absl::Now() >= CallDeadline(context)) {
    return absl::DeadlineExceededError("deadline passed while queued");
  }
  return absl::CancelledError("request cancelled by the client while queued");
}

namespace {

class UnaryNormalize final : public grpc::ServerUnaryReactor {
 public:
  UnaryNormalize(const CallEnv& env, grpc::CallbackServerContext* context,
                 const v1::NormalizeRequest* request, v1::NormalizeResponse* response)
      : env_(env), context_(context), start_(absl::Now()) {
    absl::StatusOr<std::unique_ptr<Work>> work =
        MakeWork(env, *request, response, CallDeadline(*context), &cancelled_);
    if (!work.ok()) {
      spdlog::debug("request {} rejected: {}", request->id(), work.status().ToString());
      Finish(ToGrpcStatus(work.status()));
      return;
    }
    (*work)->done = [this, response](const absl::Status& status, const WorkResult& result) {
      if (status.ok()) {
        SetTiming(result, start_, response);
      } else {
        response->Clear();
      }
      Finish(ToGrpcStatus(status));
    };
    // From here on the scheduler may finish the call (and gRPC delete this reactor once
    // the handler has returned): only the atomic id is written.
    absl::StatusOr<uint64_t> id = env.scheduler->Enqueue(*work);
    if (!id.ok()) {
      response->Clear();
      Finish(ToGrpcStatus(id.status()));
      return;
    }
    work_id_.store(*id);
    // OnCancel may have run on another thread before the id was stored, and then could
    // not take the work out of the queue; the work would wait there until an executor
    // dropped it. (Sequentially consistent store-then-load on both sides: at least one of
    // them sees the other's store.) Cancel ignores an id that is no longer queued.
    if (cancelled_.load()) env.scheduler->Cancel(*id, CancelReason(*context));
  }

  void OnCancel() override {
    cancelled_.store(true);
    if (const uint64_t id = work_id_.load(); id != 0) {
      env_.scheduler->Cancel(id, CancelReason(*context_));
    }
  }
  void OnDone() override { delete this; }

 private:
  const CallEnv& env_;
  grpc::CallbackServerContext* context_;
  const absl::Time start_;
  std::atomic<bool> cancelled_{false};
  std::atomic<uint64_t> work_id_{0};
};

}  // namespace

grpc::ServerUnaryReactor* StartUnaryNormalize(const CallEnv& env,
                                              grpc::CallbackServerContext* context,
                                              const v1::NormalizeRequest* request,
                                              v1::NormalizeResponse* response) {
  return new UnaryNormalize(env, context, request, response);
}

}  // namespace normd::server
