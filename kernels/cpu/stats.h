// Chan's merge of partial statistics, shared by the CPU kernels.
//
// Precision plan of the CPU backend (docs/semantics.md, Accuracy):
// - Row ops: sums in fp32 over blocks of eight vectors (LayerNorm's f16/bf16 moments:
//   sixteen), each block's lanes added into double accumulators. LayerNorm (and GroupNorm,
//   InstanceNorm) sum x - shift and its square in the load pass, shift the mean of the first
//   block; where the shift is within sigma / 2 of the mean that is exact to 2^-22 sigma
//   (2^-21.5 in blocks of sixteen) and 2^-21 relative, else a centred pass
//   corrects the mean (OnePassMoments, RowMoments): the mean within ~2^-23 sigma and the
//   inverse scale within ~2^-22 relative whatever the offset. Rows whose squares leave
//   fp32's range are redone in double (row_pass-inl.h). The epilogue is fp32, as the rule's
//   third clause allows where a bias or residual cancels.
// - Channel ops: fp32 blocks gathered in double, per run (channels-first: blocks of sixteen
//   vectors, RunShiftedSumsF32, the mean within 2^-21.5 sigma) or down the columns of a
//   block, shifted by the mean of the leading rows (channels-last), with the same guard and
//   fallback. BatchNorm's mean and variance are outputs held to the F32
//   rule, 1e-5 * (1 + |mean|), which the fp32 sums' 2^-21.5 sigma meets unless sigma is large
//   beside 1 + |mean| (Fp32MeanSuffices); such a channel's sums are redone in double: of
//   deviations from one of the data's elements, in one pass where that element lies within
//   32 sigma of the mean (shifted_sums-inl.h), else from a first double mean.
// - Outputs start from (x - hi) * scale - lo * scale, one FMA, with mean = hi + lo split
//   into two floats (the channel ops fold their shift into the second term): x - hi is
//   exact when x is near the mean (Sterbenz).
// Stateless; safe from any thread.
#ifndef NORMD_KERNELS_CPU_STATS_H_
#define NORMD_KERNELS_CPU_STATS_H_

#include <cmath>
#include <cstdint>

namespace normd::kernels::cpu {

// A bound, relative to sigma, on the error of a mean from fp32 sums gathered in double
// (RunMoments, ColumnMoments without f64): their worst case is about 2^-22 sigma, 2^-21.5
// for runs (RunShiftedSumsF32's blocks of sixteen vectors).
inline constexpr double kFp32MeanError = 0x1p-21;

// Whether such a mean meets the F32 rule an output mean is held to (1e-5 * (1 + |mean|)),
// with a factor of two to spare. False for NaN or Inf statistics: double sums decide them.
inline bool Fp32MeanSuffices(double mean, double var) {
  return kFp32MeanError * std::sqrt(var) <= 5e-6 * (1 + std::fabs(mean));
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
