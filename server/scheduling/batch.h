// Dynamic batching policy: which queued Works may share one backend run, and how a batch
// becomes backend calls. Row-wise jobs (LayerNorm, RMSNorm, L2, QK-norm) of one input
// dtype batch with each other whatever their sizes and parameters: the run is a segment
// table of their RowNormArgs (Backend::RowNormBatch). BatchNorm and GroupNorm jobs run
// alone.
//
// Stateless functions; the caller holds whatever lock guards the queue.
#ifndef NORMD_SCHEDULING_BATCH_H_
#define NORMD_SCHEDULING_BATCH_H_

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "normd/kernels/backend.h"
#include "normd/scheduling/work.h"

namespace normd::server {

struct BatchLimits {
  int64_t max_rows = 1;  // <= 1: no batching
  int64_t max_bytes = 0;
};

// Rows a job adds to a batch (QK-norm: q's and k's).
int64_t BatchRows(const Job& job);

// Moves from `queue` into `batch` the first live Work and, when it is batchable, the
// queued Works that may join it within `limits` (in queue order; the others keep their
// places). Works found cancelled or past their deadline on the way are moved to
// `dropped` with the status to answer them with. Returns the bytes taken out of the queue.
int64_t TakeBatch(std::deque<std::unique_ptr<Work>>& queue, const BatchLimits& limits,
                  absl::Time now, std::vector<std::unique_ptr<Work>>& batch,
                  std::vector<std::pair<std::unique_ptr<Work>, absl::Status>>& dropped);

// True when `batch` (non-empty) could take more: it is batchable and under both limits.
bool BatchHasRoom(const std::vector<std::unique_ptr<Work>>& batch, const BatchLimits& limits);

// The backend calls for `batch`: one RowNormBatch over every row segment, or the one
// channel-op call.
absl::Status RunOnBackend(kernels::Backend& backend,
                          const std::vector<std::unique_ptr<Work>>& batch);

}  // namespace normd::server

#endif  // NORMD_SCHEDULING_BATCH_H_
