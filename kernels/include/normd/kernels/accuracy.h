// The accuracy rule of docs/semantics.md as one predicate, for the tests that compare a
// backend with the float64 reference and for normbench --verify: F32 within
// 1e-5 (1 + |ref|); F16/BF16 within one ulp of the reference rounded to the type (round to
// nearest even, no double rounding); either way, within 2^-20 of the magnitude of the
// terms summed after normalizing (what an fp32 epilogue makes where a bias or residual
// cancels; the reference reports that magnitude per element); NaN only where the
// reference is NaN; an infinite reference met exactly. Stateless, header-only, safe from
// any thread.
#ifndef NORMD_KERNELS_ACCURACY_H_
#define NORMD_KERNELS_ACCURACY_H_

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "normd/kernels/dtype.h"

namespace normd::kernels {

// Nearest value of type t to the double d (round to nearest even, no double rounding).
inline float RoundDouble(DType t, double d) {
  if (t == DType::kF32 || std::isnan(d)) return static_cast<float>(d);
  const float f = static_cast<float>(d);
  const float r = RoundTo(t, f);
  // Check the representable neighbours of r: rounding via float may have moved a tie.
  const uint16_t b = HalfBits(t, r);
  float best = r;
  for (int delta : {-1, 1}) {
    const float cand = HalfValue(t, static_cast<uint16_t>(b + delta));
    if (std::isnan(cand) || std::isinf(r)) continue;
    const double dc = std::fabs(cand - d), db = std::fabs(best - d);
    if (dc < db || (dc == db && (HalfBits(t, cand) & 1) == 0)) best = cand;
  }
  return best;
}

// Signed-magnitude bits mapped onto a line, so neighbouring values differ by one.
inline int64_t OrderedBits(DType t, float v) {
  const uint16_t b = HalfBits(t, v);
  return (b & 0x8000) ? -static_cast<int64_t>(b & 0x7fff) : static_cast<int64_t>(b);
}

// The third clause's factor: |y - ref| <= kMagnitudeTolerance * M.
inline constexpr double kMagnitudeTolerance = 0x1p-20;

// Whether an output element y of type t meets the rule against the reference value;
// `magnitude` is M = |n * g| + |b| + |alpha * skip| for outputs that sum terms after
// normalizing (0: the third clause does not apply).
inline bool WithinAccuracy(DType t, float y, double ref, double magnitude = 0) {
  if (std::isnan(ref) || std::isnan(y)) return std::isnan(ref) && std::isnan(y);
  if (!std::isinf(ref) && std::fabs(y - ref) <= kMagnitudeTolerance * magnitude) return true;
  if (t == DType::kF32) {
    return std::isinf(ref) ? y == ref : std::fabs(y - ref) <= 1e-5 * (1 + std::fabs(ref));
  }
  return std::llabs(OrderedBits(t, y) - OrderedBits(t, RoundDouble(t, ref))) <= 1;
}

// The same, where the reference also gives the output with cast_before_weight's
// intermediate at its other neighbour (`alt`; NaN: none): either value may be met.
inline bool WithinAccuracy(DType t, float y, double ref, double magnitude, double alt) {
  return WithinAccuracy(t, y, ref, magnitude) ||
         (!std::isnan(alt) && WithinAccuracy(t, y, alt, magnitude));
}

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_ACCURACY_H_
