// The float64 scalar oracle of every op family: the formulas of docs/semantics.md evaluated in
// double on the (already rounded) inputs, unrounded outputs. Tests compare every backend
// with it. Deliberately simple and slow; stateless, safe from any thread.
//
// cast_before_weight is honoured: the intermediate x*r is rounded to x's dtype, as the
// option asks; the final rounding to the output dtype is left to the caller.
#ifndef NORMD_KERNELS_REFERENCE_H_
#define NORMD_KERNELS_REFERENCE_H_

#include <vector>

#include "normd/kernels/ops.h"

namespace normd::kernels::reference {

// `magnitude`, per element of y: M = |n * g| + |b| + |alpha * skip| of docs/semantics.md's
// accuracy rule (the terms summed after normalizing).
// `y_alt` (cast_before_weight with F16/BF16 input only, else empty): the output had the
// intermediate x * r gone to its other neighbour, where x * r lies within 2^-20 relative of
// a rounding boundary (docs/semantics.md: such elements are judged against either); NaN
// where it does not.
struct RowNormResult {
  std::vector<double> y, magnitude, y_alt;
  std::vector<double> h;  // ADD_THEN_NORM only
};
RowNormResult RowNorm(const RowNormArgs& args);

// The statistics of row `row` (its residual added): the mean (LayerNorm; 0 otherwise), the
// standard deviation (LayerNorm; 0 otherwise) and the inverse scale the row is multiplied
// by (1/sigma, 1/rms, 1/norm, eps included).
struct RowStats {
  double mean = 0, sigma = 0, inverse_scale = 1;
};
RowStats RowStatistics(const RowNormArgs& args, int64_t row);

struct BatchNormResult {
  std::vector<double> y, magnitude;
  std::vector<double> mean, var;                  // training only (var biased)
  std::vector<double> running_mean, running_var;  // training with running stats only
};
BatchNormResult BatchNorm(const BatchNormArgs& args);

struct GroupNormResult {
  std::vector<double> y, magnitude;
};
GroupNormResult GroupNorm(const GroupNormArgs& args);

}  // namespace normd::kernels::reference

#endif  // NORMD_KERNELS_REFERENCE_H_
