// What the closed and open loops (closed_loop.cc, open_loop.cc) share: RunControl, which
// decides per send whether a run goes on, the Answer a recorder takes, and MeasureOne.
// Private to normd_load.
//
// Thread safety: RunControl's Claim and Over may be called from any thread at once; its
// workload and recorder outlive the run.
#ifndef NORMD_CLIENT_LOAD_RUN_CONTROL_H_
#define NORMD_CLIENT_LOAD_RUN_CONTROL_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "normd/client.h"
#include "normd/load/load_recorder.h"
#include "normd/load/load_stats.h"
#include "normd/load/workload.h"

namespace normd {
namespace load_internal {

// What decides, per send, whether a run goes on.
class RunControl {
 public:
  RunControl(const Workload& workload, LoadRecorder* recorder, absl::Time end,
             const std::atomic<bool>* stop)
      : workload_(workload), recorder_(recorder), end_(end), stop_(stop) {}
  // The sequence number of the next request, and in `phase` the recorder's phase it
  // belongs to; -1 when the run is over.
  int64_t Claim(int* phase) {
    if (Over()) return -1;
    *phase = recorder_->Sent();
    if (*phase < 0) {
      limited_.store(true, std::memory_order_relaxed);
      return -1;
    }
    return sends_.fetch_add(1, std::memory_order_relaxed);
  }
  bool Over() const {
    return (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) || absl::Now() >= end_ ||
           limited_.load(std::memory_order_relaxed);
  }
  const Workload& workload() const { return workload_; }
  LoadRecorder* recorder() const { return recorder_; }

 private:
  const Workload& workload_;
  LoadRecorder* const recorder_;
  const absl::Time end_;
  const std::atomic<bool>* const stop_;
  std::atomic<int64_t> sends_{0};
  std::atomic<bool> limited_{false};  // the recorder's limit was reached
};

// The answer to a request sent (or due) at `sent`: its latency runs to now.
inline Answer MakeAnswer(absl::StatusCode code, const v1::NormalizeResponse* r, std::string id,
                         absl::Time sent, const CallInfo& info) {
  Answer a;
  a.code = code;
  a.response = r;
  a.sent_id = std::move(id);
  a.latency_us = absl::ToInt64Microseconds(absl::Now() - sent);
  a.peer = info.peer;
  a.previous_attempts = info.previous_attempts;
  return a;
}

// One request, every answer of `run` measured.
template <class Run>
LoadStats MeasureOne(const v1::NormalizeRequest& request, Run run) {
  const Workload workload = Workload::Of(request);
  LoadRecorder recorder;
  recorder.BeginMeasurement();
  run(workload, &recorder);
  return recorder.Take();
}

}  // namespace load_internal
}  // namespace normd

#endif  // NORMD_CLIENT_LOAD_RUN_CONTROL_H_
