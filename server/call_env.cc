#include "server/call_env.h"

#include "absl/time/clock.h"
#include "server/request_builder.h"

namespace normd::server {

absl::StatusOr<std::unique_ptr<Work>> MakeWork(const CallEnv& env,
                                               const v1::NormalizeRequest& request,
                                               v1::NormalizeResponse* response, absl::Time deadline,
                                               const std::atomic<bool>* cancelled) {
  response->set_id(request.id());
  auto work = std::make_unique<Work>();
  SharedMemoryAccess shared_memory(env.shared_memory);
  absl::StatusOr<Job> job = BuildJob(request, env.options.limits, response, &shared_memory);
  if (!job.ok()) {
    // Partially allocated outputs must not travel with an error.
    response->Clear();
    response->set_id(request.id());
    return job.status();
  }
  work->job = *std::move(job);
  work->held = shared_memory.TakeHeld();
  // The bytes this request pins while queued: its message and its allocated outputs.
  work->bytes = static_cast<int64_t>(request.ByteSizeLong() + response->ByteSizeLong());
  work->deadline = deadline;
  work->cancelled = cancelled;
  return work;
}

absl::Status ReserveFor(MemoryBudget* budget, size_t message_bytes,
                        MemoryBudget::Reservation* reservation) {
  if (budget == nullptr) return absl::OkStatus();
  absl::StatusOr<MemoryBudget::Reservation> r =
      budget->Reserve(2 * static_cast<int64_t>(message_bytes));
  if (!r.ok()) return r.status();
  *reservation = *std::move(r);
  return absl::OkStatus();
}

void SetTiming(const WorkResult& result, absl::Time start, v1::NormalizeResponse* response) {
  response->set_backend(result.backend == kernels::BackendKind::kCuda ? v1::BACKEND_CUDA
                                                                      : v1::BACKEND_CPU);
  v1::Timing* timing = response->mutable_timing();
  timing->set_queue_us(absl::ToInt64Microseconds(result.queue));
  timing->set_compute_us(absl::ToInt64Microseconds(result.compute));
  timing->set_total_us(absl::ToInt64Microseconds(absl::Now() - start));
  timing->set_batch_requests(result.batch_requests);
}

void EchoInto(const v1::NormalizeRequest& request, v1::NormalizeResponse* response) {
  response->set_id(request.id());
  // The one copy an echo makes stands in for the output a kernel would write.
  *response->mutable_output() = request.input();
}

}  // namespace normd::server
