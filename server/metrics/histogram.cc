#include "server/metrics/histogram.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace normd::server::metrics {

Histogram::Histogram(std::vector<double> bounds, double unit_scale)
    : bounds_(std::move(bounds)),
      unit_scale_(unit_scale),
      buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (double b : bounds_) limits_.push_back(static_cast<int64_t>(std::llround(b * unit_scale)));
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(int64_t value) {
  size_t i = 0;
  while (i < limits_.size() && value > limits_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::AppendTo(std::string* out, absl::string_view name, absl::string_view labels) const {
  const absl::string_view sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    const std::string le = i < bounds_.size() ? absl::StrCat(bounds_[i]) : "+Inf";
    absl::StrAppend(out, name, "_bucket{", labels, sep, "le=\"", le, "\"} ", cumulative, "\n");
  }
  // The count is the +Inf bucket, so that the two always agree within one scrape.
  absl::StrAppend(out, name, "_sum", labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}",
                  " ", static_cast<double>(sum_.load(std::memory_order_relaxed)) / unit_scale_,
                  "\n");
  absl::StrAppend(out, name, "_count", labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}",
                  " ", cumulative, "\n");
}

std::vector<double> LatencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
}

}  // namespace normd::server::metrics
