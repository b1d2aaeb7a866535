#include "normd/load/load_recorder.h"

#include <algorithm>
#include <limits>

#include "normd/load/verify.h"
#include "normd/shared_memory.h"

namespace normd {

void LoadRecorder::BeginMeasurement() {
  absl::MutexLock l(&mu_);
  BeginLocked();
}

void LoadRecorder::BeginLocked() {
  ++phase_;
  origin_ = absl::Now();
  end_ = absl::InfiniteFuture();
  stats_ = LoadStats();
}

void LoadRecorder::BeginMeasurementAfter(int64_t sends) {
  absl::MutexLock l(&mu_);
  begin_after_ = sends;
  if (total_sent_ >= sends) BeginLocked();
}

void LoadRecorder::set_limit(int64_t requests) {
  absl::MutexLock l(&mu_);
  limit_ = requests;
}

void LoadRecorder::EndMeasurement() {
  absl::MutexLock l(&mu_);
  end_ = absl::Now();
}

int LoadRecorder::Sent() {
  absl::MutexLock l(&mu_);
  if (phase_ == 0 && begin_after_ >= 0 && total_sent_ >= begin_after_) BeginLocked();
  if (phase_ > 0 && limit_ >= 0 && stats_.sent >= limit_) return -1;
  ++total_sent_;
  if (phase_ > 0) ++stats_.sent;
  return phase_;
}

void LoadRecorder::Record(int phase, const WorkItem& item, Answer a) {
  // The check runs before the lock: it reads every output element.
  if (verify_ && a.code == absl::StatusCode::kOk && a.response != nullptr &&
      item.reference != nullptr) {
    if (item.region == nullptr) {
      a.mismatched = Mismatches(*item.reference, *a.response);
    } else {
      // --shm: the outputs are in the kind's region (which concurrent calls of the kind
      // all write, with the same values); a reference the region cannot resolve counts
      // every element as wrong.
      v1::NormalizeResponse fetched = *a.response;
      a.mismatched = FetchResponse(&fetched, *item.region).ok()
                         ? Mismatches(*item.reference, fetched)
                         : std::numeric_limits<int64_t>::max();
    }
  }
  a.bytes = item.request_bytes +
            (a.response != nullptr ? static_cast<int64_t>(a.response->ByteSizeLong()) : 0);
  const absl::Time now = absl::Now();
  absl::MutexLock l(&mu_);
  if (phase == 0 || phase != phase_) return;  // a warmup's, or an earlier phase's
  a.second = absl::ToDoubleSeconds(now - origin_);
  stats_.Record(a);
}

void LoadRecorder::RecordLate(int phase, int64_t late_us) {
  absl::MutexLock l(&mu_);
  if (phase != 0 && phase == phase_) stats_.send_late_us.Record(late_us);
}

void LoadRecorder::Peek(const std::function<void(const LoadStats&, absl::Time)>& fn) const {
  absl::MutexLock l(&mu_);
  fn(stats_, origin_);
}

LoadStats LoadRecorder::Take() {
  absl::MutexLock l(&mu_);
  return std::move(stats_);
}

double LoadRecorder::elapsed() const {
  absl::MutexLock l(&mu_);
  return absl::ToDoubleSeconds(std::min(end_, absl::Now()) - origin_);
}

}  // namespace normd
