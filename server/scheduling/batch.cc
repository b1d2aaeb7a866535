#include "batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace normd::server {
namespace {

bool Batchable(const Job& job) {
  return job.family == Job::Family::kRowNorm || job.family == Job::Family::kQkNorm;
}

// Whether `w` may join a batch headed by `head`.
bool Compatible(const Work& head, const Work& w) {
  return Batchable(head.job) && Batchable(w.job) && head.job.row.x.dtype == w.job.row.x.dtype;
}

absl::Status DropReason(const Work& w, absl::Time now) {
  if (w.cancelled != nullptr && w.cancelled->load(std::memory_order_relaxed)) {
    return absl::CancelledError("request cancelled by the client while queued");
  }
  if (now > w.deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        "deadline passed while queued (", absl::FormatDuration(now - w.enqueued), " in queue)"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t BatchRows(const Job& job) {
  return job.family == Job::Family::kQkNorm ? job.row.rows + job.row_k.rows : job.row.rows;
}

bool BatchHasRoom(const std::vector<std::unique_ptr<Work>>& batch, const BatchLimits& limits) {
  if (limits.max_rows <= 1 || !Batchable(batch.front()->job)) return false;
  int64_t rows = 0, bytes = 0;
  for (const auto& w : batch) {
    rows += BatchRows(w->job);
    bytes += w->bytes;
  }
  return rows < limits.max_rows && bytes < limits.max_bytes;
}

int64_t TakeBatch(std::deque<std::unique_ptr<Work>>& queue, const BatchLimits& limits,
                  absl::Time now, std::vector<std::unique_ptr<Work>>& batch,
                  std::vector<std::pair<std::unique_ptr<Work>, absl::Status>>& dropped) {
  int64_t rows = 0, bytes = 0, taken_bytes = 0;
  for (const auto& w : batch) {
    rows += BatchRows(w->job);
    bytes += w->bytes;
  }
  const bool batching = limits.max_rows > 1;
  bool full = !batch.empty() && !BatchHasRoom(batch, limits);
  for (auto& w : queue) {
    if (full) break;
    if (absl::Status why = DropReason(*w, now); !why.ok()) {
      taken_bytes += w->bytes;
      dropped.emplace_back(std::move(w), std::move(why));
      continue;
    }
    if (batch.empty()) {
      rows += BatchRows(w->job);
      bytes += w->bytes;
      taken_bytes += w->bytes;
      batch.push_back(std::move(w));
      full = !batching || !Batchable(batch.front()->job);
      continue;
    }
    if (!Compatible(*batch.front(), *w)) continue;
    const int64_t r = BatchRows(w->job);
    if (rows + r > limits.max_rows || bytes + w->bytes > limits.max_bytes) {
      full = true;  // FIFO within the batchable kind: nothing overtakes a request that waits
      break;
    }
    rows += r;
    bytes += w->bytes;
    taken_bytes += w->bytes;
    batch.push_back(std::move(w));
  }
  queue.erase(std::remove(queue.begin(), queue.end(), nullptr), queue.end());
  return taken_bytes;
}

absl::Status RunOnBackend(kernels::Backend& backend,
                          const std::vector<std::unique_ptr<Work>>& batch) {
  const Job& head = batch.front()->job;
  if (!Batchable(head)) {
    if (head.empty) return absl::OkStatus();
    return head.family == Job::Family::kBatchNorm ? backend.BatchNorm(head.batch)
                                                  : backend.GroupNorm(head.group);
  }
  std::vector<kernels::RowNormArgs> segments;
  segments.reserve(batch.size() * 2);
  for (const auto& w : batch) {
    if (w->job.empty) continue;
    segments.push_back(w->job.row);
    if (w->job.family == Job::Family::kQkNorm) segments.push_back(w->job.row_k);
  }
  if (segments.empty()) return absl::OkStatus();
  return backend.RowNormBatch(segments);
}

}  // namespace normd::server
