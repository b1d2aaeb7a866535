// Argument structs of the op families every backend implements. Validation happens
// before these are built (server/request_builder), so a backend may assume: sizes are
// consistent with the pointers, eps is finite and >= 0, groups divide channels, and every
// required tensor is present. Plain values; see tensor.h for lifetime rules.
#ifndef NORMD_KERNELS_OPS_H_
#define NORMD_KERNELS_OPS_H_

#include <cmath>
#include <cstdint>

#include "normd/kernels/tensor.h"

namespace normd::kernels {

enum class EpsPlacement : uint8_t { kInsideSqrt, kOutsideSqrt };
enum class RowNormKind : uint8_t { kLayer, kRms, kL2 };
enum class ResidualPlacement : uint8_t { kNone, kAddThenNorm, kNormThenAdd };
enum class Layout : uint8_t { kChannelsFirst, kChannelsLast };

inline constexpr double kDefaultLayerNormEps = 1e-5;
inline constexpr double kDefaultRmsNormEps = 1e-6;
inline constexpr double kDefaultL2NormEps = 1e-12;
inline constexpr double kDefaultBatchNormEps = 1e-5;
inline constexpr double kDefaultBatchNormMomentum = 0.1;

// Number of leading elements pRMSNorm takes its statistics over: ceil(p * d), at least 1.
// One definition shared by every backend so they agree on the boundary.
inline int64_t PartialCount(double fraction, int64_t d) {
  if (fraction >= 1.0) return d;
  const int64_t m = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(d)));
  return m < 1 ? 1 : (m > d ? d : m);
}

// LayerNorm, RMSNorm, L2Norm (and QK-norm, which is two of these) over `rows` rows of
// `cols` contiguous elements, with optional residual fusion.
struct RowNormArgs {
  RowNormKind kind = RowNormKind::kRms;
  int64_t rows = 0;
  int64_t cols = 0;
  ConstTensor x;
  ConstTensor weight;  // [cols] or absent (LayerNorm, RMSNorm)
  ConstTensor bias;    // [cols] or absent (LayerNorm)
  double eps = kDefaultRmsNormEps;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  double weight_offset = 0.0;       // RMSNorm
  double partial_fraction = 1.0;    // RMSNorm
  bool cast_before_weight = false;  // RMSNorm: round x*r to x's dtype before the weight
  ResidualPlacement residual = ResidualPlacement::kNone;
  ConstTensor skip;  // rows*cols, present iff residual != kNone
  double alpha = 1.0;
  MutTensor y;  // rows*cols
  MutTensor h;  // rows*cols, optional: ADD_THEN_NORM's sum
};

// Per-channel statistics over [N, C, S] (channels first) or [N, S, C] (channels last).
struct BatchNormArgs {
  int64_t n = 0, c = 0, s = 0;
  Layout layout = Layout::kChannelsFirst;
  ConstTensor x;
  ConstTensor weight, bias;               // [C] or absent
  ConstTensor running_mean, running_var;  // [C]; required when !training
  bool training = false;
  double momentum = kDefaultBatchNormMomentum;
  double eps = kDefaultBatchNormEps;
  MutTensor y;
  MutTensor batch_mean, batch_var;              // training only, optional
  MutTensor running_mean_out, running_var_out;  // training with running stats, optional
};

// Statistics per (sample, group) over C/G channels x S positions; affine per channel.
// InstanceNorm with input statistics is GroupNorm with groups == C.
struct GroupNormArgs {
  int64_t n = 0, c = 0, s = 0;
  int64_t groups = 1;
  Layout layout = Layout::kChannelsFirst;
  ConstTensor x;
  ConstTensor weight, bias;  // [C] or absent
  double eps = kDefaultBatchNormEps;
  MutTensor y;
};

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_OPS_H_
