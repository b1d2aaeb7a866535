#include "server/scheduling/scheduler.h"

#include "absl/time/clock.h"

namespace normd::server {

Scheduler::Scheduler(std::vector<std::unique_ptr<kernels::Backend>> backends,
                     SchedulerOptions options)
    : backends_(std::move(backends)), options_(options) {
  for (const auto& b : backends_) {
    (b->kind() == kernels::BackendKind::kCpu ? cpu_ : cuda_) = b.get();
  }
}

absl::StatusOr<kernels::Backend*> Scheduler::Route(const Job& job) const {
  switch (job.preference) {
    case BackendPreference::kCpu:
      return cpu_;
    case BackendPreference::kCuda:
      if (cuda_ == nullptr) {
        return absl::FailedPreconditionError(
            "backend: CUDA was requested but no CUDA device is available on this server");
      }
      return cuda_;
    case BackendPreference::kAuto:
      break;
  }
  if (cuda_ != nullptr && job.input_bytes >= options_.cuda_min_bytes) return cuda_;
  return cpu_;
}

absl::StatusOr<RunResult> Scheduler::Run(const Job& job) {
  absl::StatusOr<kernels::Backend*> backend = Route(job);
  if (!backend.ok()) return backend.status();
  RunResult result;
  result.backend = (*backend)->kind();
  if (job.empty) return result;
  const absl::Time start = absl::Now();
  absl::Status status;
  switch (job.family) {
    case Job::Family::kRowNorm:
      status = (*backend)->RowNorm(job.row);
      break;
    case Job::Family::kQkNorm:
      status = (*backend)->RowNorm(job.row);
      if (status.ok()) status = (*backend)->RowNorm(job.row_k);
      break;
    case Job::Family::kBatchNorm:
      status = (*backend)->BatchNorm(job.batch);
      break;
    case Job::Family::kGroupNorm:
      status = (*backend)->GroupNorm(job.group);
      break;
  }
  if (!status.ok()) return status;
  result.compute_us = absl::ToInt64Microseconds(absl::Now() - start);
  return result;
}

}  // namespace normd::server
