#include "normd/load/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace normd {
namespace {
constexpr int kExact = 128;  // values below are their own bucket
constexpr int kHalf = 64;    // buckets per power of two above
}  // namespace

int LatencyHistogram::Index(int64_t v) {
  if (v < kExact) return static_cast<int>(v);
  // shift >= 1 such that v >> shift lies in [64, 128).
  const int shift = (63 - std::countl_zero(static_cast<uint64_t>(v))) - 6;
  return kExact + (shift - 1) * kHalf + static_cast<int>((v >> shift) - kHalf);
}

int64_t LatencyHistogram::Lowest(int index) {
  if (index < kExact) return index;
  const int shift = (index - kExact) / kHalf + 1;
  return (static_cast<int64_t>((index - kExact) % kHalf) + kHalf) << shift;
}

int64_t LatencyHistogram::Width(int index) {
  return index < kExact ? 1 : int64_t{1} << ((index - kExact) / kHalf + 1);
}

void LatencyHistogram::Record(int64_t v) {
  v = std::max<int64_t>(v, 0);
  const int i = Index(v);
  if (i >= static_cast<int>(counts_.size())) counts_.resize(i + 1);
  ++counts_[i];
  min_ = count_ == 0 ? v : std::min(min_, v);
  max_ = std::max(max_, v);
  sum_ += v;
  ++count_;
}

void LatencyHistogram::Merge(const LatencyHistogram& o) {
  if (o.count_ == 0) return;
  if (o.counts_.size() > counts_.size()) counts_.resize(o.counts_.size());
  for (size_t i = 0; i < o.counts_.size(); ++i) counts_[i] += o.counts_[i];
  min_ = count_ == 0 ? o.min_ : std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
  sum_ += o.sum_;
  count_ += o.count_;
}

int64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  const int64_t rank = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(p * static_cast<double>(count_))), 1, count_);
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const int index = static_cast<int>(i);
      const int64_t middle = Lowest(index) + Width(index) / 2;
      return std::clamp(index < kExact ? Lowest(index) : middle, min_, max_);
    }
  }
  return max_;
}

}  // namespace normd
