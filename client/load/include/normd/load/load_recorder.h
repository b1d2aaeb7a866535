// LoadRecorder: where the load generators (load_gen.h) record a run's answers. It decides
// which answers count (those of requests sent after the measurement began; a warmup's are
// dropped), enforces a limit on measured requests, checks answers with --verify, and keeps
// the stats (load_stats.h) that normbench reads while the run goes on.
//
// Thread safety: safe for concurrent use; every method takes its own lock.
#ifndef NORMD_LOAD_LOAD_RECORDER_H_
#define NORMD_LOAD_LOAD_RECORDER_H_

#include <cstdint>
#include <functional>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "normd/load/load_stats.h"
#include "normd/load/workload.h"

namespace normd {

class LoadRecorder {
 public:
  // With `verify`, every OK answer is checked against its kind's reference (the workload's
  // references must have been computed).
  explicit LoadRecorder(bool verify = false) : verify_(verify) {}

  // Starts a measured phase: the stats start over, their origin is now, and only
  // requests sent from now on count.
  void BeginMeasurement();
  // The same, at the moment the `sends`-th request of the run goes out (a warmup by
  // count); 0: at the first.
  void BeginMeasurementAfter(int64_t sends);
  // Measure at most `requests` requests: Sent() refuses the ones after (-1: no limit).
  void set_limit(int64_t requests);
  // Marks the measured phase's end for the throughput (answers still in flight are
  // recorded but were sent before; see elapsed()).
  void EndMeasurement();

  // A request is about to go out: returns the phase it belongs to (for Record) and counts
  // it, or -1 when the measured requests reached the limit (then it must not be sent).
  int Sent();
  // Its answer. `item` is the kind that was sent; `late_us` >= 0: the open loop's delay.
  void Record(int phase, const WorkItem& item, Answer answer);
  void RecordLate(int phase, int64_t late_us);

  // Reads the stats under the lock.
  void Peek(const std::function<void(const LoadStats&, absl::Time origin)>& fn) const;
  LoadStats Take();  // the stats, moved out
  // Seconds from BeginMeasurement to EndMeasurement (or to now, before it).
  double elapsed() const;

 private:
  const bool verify_;
  mutable absl::Mutex mu_;
  void BeginLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int phase_ ABSL_GUARDED_BY(mu_) = 0;  // 0: not measuring
  int64_t total_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t begin_after_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t limit_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time origin_ ABSL_GUARDED_BY(mu_) = absl::Now();
  absl::Time end_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  LoadStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace normd

#endif  // NORMD_LOAD_LOAD_RECORDER_H_
