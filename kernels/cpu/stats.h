// Chan's merge of partial statistics, shared by the CPU kernels.
//
// Precision plan of the CPU backend (docs/semantics.md allows "fp32 or wider"):
// - Every sum (the mean, sums of squares for RMSNorm/L2Norm, squared deviations for the
//   variance) is accumulated in double. Outputs near zero (x close to the mean, or a bias
//   or residual cancelling the normalized value) carry the error of the statistics
//   relative to themselves, and the F16/BF16 one-ulp rule holds there only if they are
//   essentially exact; an fp32 mean of values ~3000 is off by ~1e-4, and with
//   cast_before_weight an fp32 sum of squares flips the intermediate rounding for ~2e-4
//   of the elements.
// - The deviation x - mean is formed as (x - hi) - lo with mean = hi + lo split into two
//   floats, exact when x is near the mean (Sterbenz).
// Stateless; safe from any thread.
#ifndef NORMD_KERNELS_CPU_STATS_H_
#define NORMD_KERNELS_CPU_STATS_H_

#include <cstdint>

namespace normd::kernels::cpu {

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
