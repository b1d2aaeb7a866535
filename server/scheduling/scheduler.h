// The scheduling room's door: routes a Job to a backend and runs it.
//
// Routing: an explicit CPU or CUDA preference is honoured (CUDA absent:
// FAILED_PRECONDITION); AUTO picks CUDA when a CUDA backend is present and the input is at
// least `cuda_min_bytes`, else CPU. This version runs the job on the calling thread; the
// serving-core issue adds queues and batching behind the same Run().
//
// Thread safety: Run() is safe to call concurrently from many threads.
#ifndef NORMD_SERVER_SCHEDULING_SCHEDULER_H_
#define NORMD_SERVER_SCHEDULING_SCHEDULER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "normd/kernels/backend.h"
#include "server/scheduling/job.h"

namespace normd::server {

struct SchedulerOptions {
  int64_t cuda_min_bytes = 1 << 20;
};

struct RunResult {
  kernels::BackendKind backend = kernels::BackendKind::kCpu;
  int64_t compute_us = 0;
};

class Scheduler {
 public:
  // REQUIRES: backends holds at most one backend per kind, and a CPU one.
  Scheduler(std::vector<std::unique_ptr<kernels::Backend>> backends, SchedulerOptions options);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  absl::StatusOr<RunResult> Run(const Job& job);

  // The backends present, for GetServerInfo.
  const std::vector<std::unique_ptr<kernels::Backend>>& backends() const { return backends_; }

 private:
  absl::StatusOr<kernels::Backend*> Route(const Job& job) const;

  std::vector<std::unique_ptr<kernels::Backend>> backends_;
  kernels::Backend* cpu_ = nullptr;
  kernels::Backend* cuda_ = nullptr;
  SchedulerOptions options_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_SCHEDULING_SCHEDULER_H_
