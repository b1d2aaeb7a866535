// A CPU backend behind a gate, for tests of queueing, batching, deadlines and
// cancellation: while the gate is closed every backend call blocks on entry, so requests
// pile up in the scheduler's queue; each call records the segments it was given. It can
// report itself as a CUDA backend, and as unhealthy, for tests of routing; it computes on
// the CPU either way. Part of the normd_testing library (test doubles shared by tests and
// benchmarks).
//
// Thread safety: every method may be called from any thread.
#ifndef NORMD_TESTING_GATED_BACKEND_H_
#define NORMD_TESTING_GATED_BACKEND_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::testing {

class GatedBackend final : public kernels::Backend {
 public:
  struct Segment {
    int64_t rows, cols;
  };

  explicit GatedBackend(kernels::BackendKind kind = kernels::BackendKind::kCpu)
      : kind_(kind), cpu_(Options()) {}

  kernels::BackendKind kind() const override { return kind_; }
  std::string device() const override {
    return kind_ == kernels::BackendKind::kCuda ? "gated cuda (test, computes on the cpu)"
                                                : "gated cpu (test)";
  }
  int threads() const override { return 1; }
  bool healthy() const override { return healthy_.load(); }
  void set_healthy(bool healthy) { healthy_.store(healthy); }

  absl::Status RowNorm(const kernels::RowNormArgs& args) override {
    return RowNormBatch(absl::MakeConstSpan(&args, 1));
  }
  absl::Status RowNormBatch(absl::Span<const kernels::RowNormArgs> segments) override {
    std::vector<Segment> seen;
    for (const auto& s : segments) seen.push_back({s.rows, s.cols});
    if (absl::Status failure = Enter(std::move(seen)); !failure.ok()) return failure;
    return cpu_.RowNormBatch(segments);
  }
  absl::Status BatchNorm(const kernels::BatchNormArgs& args) override {
    if (absl::Status failure = Enter({{args.n * args.s, args.c}}); !failure.ok()) return failure;
    return cpu_.BatchNorm(args);
  }
  absl::Status GroupNorm(const kernels::GroupNormArgs& args) override {
    if (absl::Status failure = Enter({{args.n * args.s, args.c}}); !failure.ok()) return failure;
    return cpu_.GroupNorm(args);
  }

  // From now on every backend call fails with `failure` (OK: computes again), as a device
  // error would.
  void FailWith(absl::Status failure) {
    absl::MutexLock l(&mu_);
    failure_ = std::move(failure);
  }

  void Close() {
    absl::MutexLock l(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock l(&mu_);
    open_ = true;
    changed_.SignalAll();
  }
  // Blocks until `n` backend calls have entered since construction.
  void AwaitEntered(int n) {
    absl::MutexLock l(&mu_);
    while (entered_ < n) changed_.Wait(&mu_);
  }
  // How many backend calls have entered since construction.
  int entered() const {
    absl::MutexLock l(&mu_);
    return entered_;
  }
  std::vector<std::vector<Segment>> calls() const {
    absl::MutexLock l(&mu_);
    return calls_;
  }

 private:
  static kernels::CpuBackendOptions Options() {
    kernels::CpuBackendOptions o;
    o.threads = 1;
    return o;
  }
  // Records the call, waits for the gate, and returns the failure to report, if any.
  absl::Status Enter(std::vector<Segment> seen) {
    absl::MutexLock l(&mu_);
    calls_.push_back(std::move(seen));
    ++entered_;
    changed_.SignalAll();
    while (!open_) changed_.Wait(&mu_);
    return failure_;
  }

  const kernels::BackendKind kind_;
  std::atomic<bool> healthy_{true};
  kernels::CpuBackend cpu_;
  mutable absl::Mutex mu_;
  bool open_ = true;
  absl::Status failure_;
  int entered_ = 0;
  absl::CondVar changed_;
  std::vector<std::vector<Segment>> calls_;
};

}  // namespace normd::testing

#endif  // NORMD_TESTING_GATED_BACKEND_H_
