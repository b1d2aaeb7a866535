// A Prometheus histogram with fixed bucket bounds whose Observe takes no lock: each bucket
// is an atomic counter (non-cumulative; made cumulative when written out), the sum an
// atomic count of nanoseconds (or of units, for unitless histograms).
//
// Thread safety: Observe and AppendTo may be called from any thread at once; a scrape
// racing with observations may see a sum and counts from slightly different instants,
// which Prometheus tolerates (counters only grow).
#ifndef NORMD_SERVER_METRICS_HISTOGRAM_H_
#define NORMD_SERVER_METRICS_HISTOGRAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace normd::server::metrics {

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, increasing; +Inf is added. `unit_scale`: the
  // recorded integer per unit of the exposed value (1e9 for seconds recorded in ns).
  Histogram(std::vector<double> bounds, double unit_scale);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // One observation of `value` recorded units (nanoseconds for a duration).
  void Observe(int64_t value);

  // `name`_bucket / _sum / _count lines with `labels` ("op=\"rms_norm\"" or "").
  void AppendTo(std::string* out, absl::string_view name, absl::string_view labels) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> bounds_;  // exposed units
  std::vector<int64_t> limits_;       // recorded units, same order
  const double unit_scale_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1 (+Inf)
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> sum_{0};
};

// Latency buckets, seconds: 50 us to 10 s.
std::vector<double> LatencyBuckets();

}  // namespace normd::server::metrics

#endif  // NORMD_SERVER_METRICS_HISTOGRAM_H_
