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

struct RowNormResult {
  std::vector<double> y;
  std::vector<double> h;  // ADD_THEN_NORM only
};
RowNormResult RowNorm(const RowNormArgs& args);

struct BatchNormResult {
  std::vector<double> y;
  std::vector<double> mean, var;                  // training only (var biased)
  std::vector<double> running_mean, running_var;  // training with running stats only
};
BatchNormResult BatchNorm(const BatchNormArgs& args);

std::vector<double> GroupNorm(const GroupNormArgs& args);

}  // namespace normd::kernels::reference

#endif  // NORMD_KERNELS_REFERENCE_H_
