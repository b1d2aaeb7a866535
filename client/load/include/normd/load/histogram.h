// LatencyHistogram: counts of non-negative integer values (microseconds in normbench) in
// log-linear buckets, HdrHistogram's layout with 7 significant bits: values below 128 are
// exact, and above that every power of two is split into 64 buckets, so a bucket is at
// most 1/64 of its lower bound wide and a percentile read as the bucket's middle is within
// 1/128 (0.8%) of the exact value. Memory grows with the largest value, not the count:
// about 18 KiB up to 2^40. Min, max and the sum (for the mean) are kept exactly.
// (libhdr_histogram is not packaged for Debian 12; this is the same scheme, in 80 lines.)
//
// Thread safety: a plain value, not safe for concurrent use.
#ifndef NORMD_LOAD_HISTOGRAM_H_
#define NORMD_LOAD_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace normd {

class LatencyHistogram {
 public:
  void Record(int64_t value);  // negative values count as 0
  void Merge(const LatencyHistogram& other);

  int64_t count() const { return count_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0 : static_cast<double>(sum_) / count_; }
  // The nearest-rank percentile, p in [0, 1] (0.5: median): the value of rank
  // ceil(p * count), read as the middle of its bucket and clamped to [min, max]; 0 when
  // empty.
  int64_t Percentile(double p) const;

 private:
  static int Index(int64_t value);
  static int64_t Lowest(int index);  // a bucket's smallest value
  static int64_t Width(int index);

  std::vector<int64_t> counts_;
  int64_t count_ = 0, min_ = 0, max_ = 0, sum_ = 0;
};

}  // namespace normd

#endif  // NORMD_LOAD_HISTOGRAM_H_
