#include "normd/scheduling/scheduler.h"

#include <algorithm>
#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "batch.h"

namespace normd::server {

// One backend's queue and executors.
struct Scheduler::Lane {
  kernels::Backend* backend = nullptr;
  const char* name = "";
  BatchLimits limits;
  absl::Duration max_delay;

  absl::Mutex mu;
  absl::CondVar work_ready;  // signalled on enqueue and on stop
  std::deque<std::unique_ptr<Work>> queue ABSL_GUARDED_BY(mu);
  int64_t queued_bytes ABSL_GUARDED_BY(mu) = 0;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::vector<std::thread> executors;
};

Scheduler::Scheduler(std::vector<std::shared_ptr<kernels::Backend>> backends,
                     SchedulerOptions options)
    : backends_(std::move(backends)), options_(options) {
  for (const auto& b : backends_) {
    const bool cuda = b->kind() == kernels::BackendKind::kCuda;
    auto lane = std::make_unique<Lane>();
    lane->backend = b.get();
    lane->name = cuda ? "CUDA" : "CPU";
    lane->limits = {options_.batch_max_rows, options_.batch_max_bytes};
    lane->max_delay = cuda ? options_.cuda_batch_max_delay : options_.cpu_batch_max_delay;
    int executors = cuda ? options_.cuda_executors : options_.cpu_executors;
    if (executors <= 0) executors = std::max(1, b->threads());
    for (int i = 0; i < executors; ++i) {
      lane->executors.emplace_back([this, l = lane.get()] { ExecutorLoop(l); });
    }
    (cuda ? cuda_ : cpu_) = std::move(lane);
    if (!cuda) inline_free_ = std::max(1, b->threads());
  }
}

Scheduler::~Scheduler() { Shutdown(); }

absl::StatusOr<Scheduler::Lane*> Scheduler::Route(const Job& job) const {
  switch (job.preference) {
    case BackendPreference::kCpu:
      return cpu_.get();
    case BackendPreference::kCuda:
      if (cuda_ == nullptr) {
        return absl::FailedPreconditionError(
            "backend: CUDA was requested but no CUDA device is available on this server");
      }
      return cuda_.get();
    case BackendPreference::kAuto:
      break;
  }
  if (cuda_ != nullptr && cuda_->backend->healthy() && job.input_bytes >= options_.cuda_min_bytes) {
    return cuda_.get();
  }
  return cpu_.get();
}

absl::StatusOr<uint64_t> Scheduler::Enqueue(std::unique_ptr<Work>& work) {
  absl::StatusOr<Lane*> routed = Route(work->job);
  if (!routed.ok()) return routed.status();
  // A call cancelled, or past its deadline, before it got here is neither queued nor run.
  if (work->cancelled != nullptr && work->cancelled->load(std::memory_order_relaxed)) {
    return absl::CancelledError("request cancelled by the client before it was queued");
  }
  if (absl::Now() > work->deadline) {
    return absl::DeadlineExceededError("deadline passed before the request was queued");
  }
  Lane* lane = *routed;
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  work->id = id;
  work->enqueued = absl::Now();

  // Shortest path: small CPU work, nothing queued ahead of it, a core to spare.
  bool run_inline = false;
  // The size is the tensors read and written, not only the memory the request pins: a
  // shared-memory request pins a few hundred bytes of message whatever its tensors weigh,
  // and a 16 MiB one run inline held its transport thread for milliseconds.
  const int64_t size = std::max(work->bytes, 2 * work->job.input_bytes);
  if (lane == cpu_.get() && options_.inline_max_bytes > 0 && size <= options_.inline_max_bytes) {
    bool queue_empty;
    {
      absl::MutexLock l(&lane->mu);
      queue_empty = lane->queue.empty() && !lane->stop;
    }
    if (queue_empty) {
      run_inline = inline_free_.fetch_sub(1, std::memory_order_acquire) > 0;
      if (!run_inline) inline_free_.fetch_add(1, std::memory_order_release);
    }
  }
  if (run_inline) {
    {
      absl::MutexLock l(&stats_mu_);
      ++stats_.enqueued;
      ++stats_.inline_runs;
      ++stats_.in_flight;
    }
    std::vector<std::unique_ptr<Work>> one;
    one.push_back(std::move(work));
    const absl::Time start = absl::Now();
    const absl::Status status = RunOnBackend(*lane->backend, one);
    inline_free_.fetch_add(1, std::memory_order_release);
    WorkResult result;
    result.backend = lane->backend->kind();
    result.queue = start - one.front()->enqueued;
    result.compute = absl::Now() - start;
    Finish(std::move(one.front()), status, result);
    return id;
  }

  {
    absl::MutexLock l(&lane->mu);
    if (lane->stop) {
      return absl::UnavailableError("server shutting down: not accepting requests");
    }
    const int64_t n = static_cast<int64_t>(lane->queue.size());
    if (n >= options_.max_queue_requests ||
        (n > 0 && lane->queued_bytes + work->bytes > options_.max_queue_bytes)) {
      absl::MutexLock s(&stats_mu_);
      ++stats_.rejected_full;
      return absl::UnavailableError(absl::StrCat(
          "server overloaded: the ", lane->name, " queue holds ", n, " requests and ",
          lane->queued_bytes, " bytes (limits: --max-queue-requests ", options_.max_queue_requests,
          ", --max-queue-bytes ", options_.max_queue_bytes, "); retry later or elsewhere"));
    }
    {
      absl::MutexLock s(&stats_mu_);
      ++stats_.enqueued;
      ++stats_.in_flight;
    }
    lane->queued_bytes += work->bytes;
    lane->queue.push_back(std::move(work));
  }
  lane->work_ready.Signal();
  return id;
}

bool Scheduler::Cancel(uint64_t id, const absl::Status& status) {
  for (Lane* lane : {cpu_.get(), cuda_.get()}) {
    if (lane == nullptr) continue;
    std::unique_ptr<Work> found;
    {
      absl::MutexLock l(&lane->mu);
      for (auto it = lane->queue.begin(); it != lane->queue.end(); ++it) {
        if ((*it)->id == id) {
          found = std::move(*it);
          lane->queue.erase(it);
          lane->queued_bytes -= found->bytes;
          break;
        }
      }
    }
    if (found != nullptr) {
      {
        absl::MutexLock s(&stats_mu_);
        ++(status.code() == absl::StatusCode::kDeadlineExceeded ? stats_.expired
                                                                : stats_.cancelled);
      }
      Finish(std::move(found), status, WorkResult{lane->backend->kind()});
      return true;
    }
  }
  return false;
}

void Scheduler::ExecutorLoop(Lane* lane) {
  std::vector<std::unique_ptr<Work>> batch;
  std::vector<std::pair<std::unique_ptr<Work>, absl::Status>> dropped;
  for (;;) {
    {
      absl::MutexLock l(&lane->mu);
      while (batch.empty() && dropped.empty()) {
        while (lane->queue.empty() && !lane->stop) lane->work_ready.Wait(&lane->mu);
        if (lane->queue.empty()) return;  // stopping and drained
        lane->queued_bytes -= TakeBatch(lane->queue, lane->limits, absl::Now(), batch, dropped);
      }
      // Optionally wait a little for batchmates; never past the head's deadline.
      if (!batch.empty() && lane->max_delay > absl::ZeroDuration()) {
        const absl::Time until =
            std::min(batch.front()->enqueued + lane->max_delay, batch.front()->deadline);
        while (BatchHasRoom(batch, lane->limits) && !lane->stop &&
               !lane->work_ready.WaitWithDeadline(&lane->mu, until)) {
          lane->queued_bytes -= TakeBatch(lane->queue, lane->limits, absl::Now(), batch, dropped);
        }
        lane->queued_bytes -= TakeBatch(lane->queue, lane->limits, absl::Now(), batch, dropped);
      }
      // Others may be waiting behind what this executor did not take.
      if (!lane->queue.empty()) lane->work_ready.Signal();
    }
    for (auto& [w, why] : dropped) {
      {
        absl::MutexLock s(&stats_mu_);
        ++(why.code() == absl::StatusCode::kDeadlineExceeded ? stats_.expired : stats_.cancelled);
      }
      Finish(std::move(w), why, WorkResult{lane->backend->kind()});
    }
    dropped.clear();
    if (!batch.empty()) RunBatch(lane, batch);
    batch.clear();
  }
}

void Scheduler::RunBatch(Lane* lane, std::vector<std::unique_ptr<Work>>& batch) {
  const absl::Time start = absl::Now();
  const absl::Status status = RunOnBackend(*lane->backend, batch);
  const absl::Time end = absl::Now();
  if (!status.ok() && options_.on_backend_error) {
    options_.on_backend_error(lane->name, batch.size(), status);
  }
  {
    absl::MutexLock s(&stats_mu_);
    ++stats_.backend_runs;
    if (batch.size() > 1) stats_.batched += static_cast<int64_t>(batch.size());
  }
  for (auto& w : batch) {
    WorkResult result;
    result.backend = lane->backend->kind();
    result.queue = start - w->enqueued;
    result.compute = end - start;
    result.batch_requests = static_cast<int>(batch.size());
    Finish(std::move(w), status, result);
  }
}

void Scheduler::Finish(std::unique_ptr<Work> work, const absl::Status& status,
                       const WorkResult& result) {
  work->done(status, result);
  work.reset();
  absl::MutexLock s(&stats_mu_);
  ++stats_.completed;
  --stats_.in_flight;
}

void Scheduler::Shutdown() {
  for (Lane* lane : {cpu_.get(), cuda_.get()}) {
    if (lane == nullptr) continue;
    {
      absl::MutexLock l(&lane->mu);
      lane->stop = true;
    }
    lane->work_ready.SignalAll();
  }
  for (Lane* lane : {cpu_.get(), cuda_.get()}) {
    if (lane == nullptr) continue;
    for (std::thread& t : lane->executors) {
      if (t.joinable()) t.join();
    }
  }
  // Inline runs finish on their callers' threads.
  absl::MutexLock s(&stats_mu_);
  stats_mu_.Await(absl::Condition(
      +[](SchedulerStats* st) { return st->in_flight == 0; }, &stats_));
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats out;
  {
    absl::MutexLock s(&stats_mu_);
    out = stats_;
  }
  out.queued_requests = 0;
  out.queued_bytes = 0;
  for (Lane* lane : {cpu_.get(), cuda_.get()}) {
    if (lane == nullptr) continue;
    absl::MutexLock l(&lane->mu);
    out.queued_requests += static_cast<int64_t>(lane->queue.size());
    out.queued_bytes += lane->queued_bytes;
  }
  return out;
}

}  // namespace normd::server
