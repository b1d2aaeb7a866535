// Statistics over data resident in a float buffer, shared by the CPU kernels.
//
// Precision plan (SEMANTICS.md "fp32 or wider"):
// - The mean is accumulated in double. Outputs near zero (x close to the mean, or a bias
//   cancelling the normalized value) carry the error of the mean relative to themselves,
//   and the F16/BF16 one-ulp rule holds there only if the mean is essentially exact; an
//   fp32 mean of values ~3000 is off by ~1e-4.
// - Sums of squares for RMSNorm and L2Norm are accumulated in double too: with
//   cast_before_weight the normalized value is rounded to the input dtype before the
//   weight, and an fp32 sum (~1e-7 relative error) flips that rounding for ~2e-4 of the
//   elements, an error of a whole F16 ulp that an F32 output shows.
// - Squared deviations for the variance are accumulated in double as well: an output that
//   a bias nearly cancels carries the variance's relative error, and fp32 sums reach
//   ~1e-6 of it at 8K elements.
// - The deviation x - mean is formed as (x - hi) - lo with mean = hi + lo split into two
//   floats, exact when x is near the mean (Sterbenz), so a mean of 1e4 with variance 1
//   keeps its digits.
// Stateless; safe from any thread.
#ifndef NORMD_KERNELS_CPU_STATS_H_
#define NORMD_KERNELS_CPU_STATS_H_

#include <cstdint>

namespace normd::kernels::cpu {

inline double SumAsDouble(const float* p, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += p[i];
    a1 += p[i + 1];
    a2 += p[i + 2];
    a3 += p[i + 3];
  }
  for (; i < n; ++i) a0 += p[i];
  return (a0 + a1) + (a2 + a3);
}

struct Moments {
  double mean = 0;
  double m2 = 0;  // sum of squared deviations: n * biased variance
};

inline Moments ComputeMoments(const float* p, int64_t n) {
  Moments m;
  m.mean = SumAsDouble(p, n) / static_cast<double>(n);
  const auto hi = static_cast<float>(m.mean);
  const auto lo = static_cast<float>(m.mean - hi);
  double a0 = 0, a1 = 0;
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const double d0 = (p[i] - hi) - lo, d1 = (p[i + 1] - hi) - lo;
    a0 += d0 * d0;
    a1 += d1 * d1;
  }
  if (i < n) {
    const double d0 = (p[i] - hi) - lo;
    a0 += d0 * d0;
  }
  m.m2 = a0 + a1;
  return m;
}

inline double SumOfSquares(const float* p, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += static_cast<double>(p[i]) * p[i];
    a1 += static_cast<double>(p[i + 1]) * p[i + 1];
    a2 += static_cast<double>(p[i + 2]) * p[i + 2];
    a3 += static_cast<double>(p[i + 3]) * p[i + 3];
  }
  for (; i < n; ++i) a0 += static_cast<double>(p[i]) * p[i];
  return (a0 + a1) + (a2 + a3);
}

// Running (count, mean, M2) merged with Chan's formula, in double: merges are per block,
// not per element, so the width costs nothing. The mean is kept as sum / count so that
// blocks of +Inf give an Inf mean (as a plain sum does) rather than Inf - Inf = NaN.
struct ChanMoments {
  double count = 0, sum = 0, m2 = 0;

  double mean() const { return sum / count; }
  void Merge(double n_b, double mean_b, double m2_b) {
    if (n_b == 0) return;
    if (count == 0) {
      count = n_b;
      sum = mean_b * n_b;
      m2 = m2_b;
      return;
    }
    const double n = count + n_b;
    const double delta = mean_b - mean();
    m2 += m2_b + delta * delta * (count * n_b / n);
    sum += mean_b * n_b;
    count = n;
  }
};

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_STATS_H_
