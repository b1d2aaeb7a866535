#include "kernels/bench/bench_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace normd::kernels::bench {

using Clock = std::chrono::steady_clock;

int64_t Calibrate(const std::function<void()>& fn, double batch) {
  fn();
  for (int64_t iters = 1;; iters *= 2) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < iters; ++i) fn();
    if (std::chrono::duration<double>(Clock::now() - start).count() >= batch ||
        iters > (int64_t{1} << 30)) {
      return iters;
    }
  }
}

double TimeBatch(const std::function<void()>& fn, int64_t iters) {
  const auto start = Clock::now();
  for (int64_t i = 0; i < iters; ++i) fn();
  return std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(iters);
}

PairTiming TimeAgainstCopy(const std::function<void()>& kernel, const std::function<void()>& copy,
                           double min_time, int repeats) {
  const int64_t ik = Calibrate(kernel, min_time / repeats);
  const int64_t ic = Calibrate(copy, min_time / repeats);
  std::vector<double> tk, tc, ratio;
  for (int r = 0; r < repeats; ++r) {
    tk.push_back(TimeBatch(kernel, ik));
    tc.push_back(TimeBatch(copy, ic));
    ratio.push_back(tc.back() / tk.back());
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(tk), median(tc), median(ratio)};
}

}  // namespace normd::kernels::bench
