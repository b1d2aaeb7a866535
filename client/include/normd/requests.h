// The options of each normd op, the NormalizeRequest each typed Client method sends, and
// the conversions between HostTensor and the wire tensor. What an option means, and its
// default, is said in proto/normd/v1/normd.proto and docs/semantics.md; an unset
// std::optional leaves the server's default.
//
//   normd::RmsNormOptions opt;
//   opt.weight = w;
//   normd::v1::NormalizeRequest r = normd::MakeRequest(x, opt);  // for a NormalizeStream
//
// Plain values and stateless functions; safe from any thread.
#ifndef NORMD_CLIENT_REQUESTS_H_
#define NORMD_CLIENT_REQUESTS_H_

#include <optional>

#include "normd/host_tensor.h"
#include "normd/v1/normd.pb.h"

namespace normd {

// kAuto: the server chooses (BACKEND_UNSPECIFIED on the wire).
enum class Backend { kAuto, kCpu, kCuda };
// EPS_PLACEMENT_INSIDE_SQRT: 1 / sqrt(var + eps); EPS_PLACEMENT_OUTSIDE_SQRT:
// 1 / (sqrt(var) + eps).
enum class EpsPlacement { kInsideSqrt, kOutsideSqrt };
enum class Layout { kChannelsFirst, kChannelsLast };

// Options every op takes.
struct CommonOptions {
  Backend backend = Backend::kAuto;
  std::optional<DType> output_dtype;  // default: the input's dtype
};

struct ResidualOptions {
  enum class Placement { kAddThenNorm, kNormThenAdd };
  HostTensor skip;
  double alpha = 1.0;
  Placement placement = Placement::kAddThenNorm;
  bool return_sum = false;
};

struct LayerNormOptions : CommonOptions {
  int normalized_ndim = 1;
  std::optional<HostTensor> weight, bias;
  std::optional<double> eps;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  std::optional<ResidualOptions> residual;
};

struct RmsNormOptions : CommonOptions {
  std::optional<HostTensor> weight;
  std::optional<double> eps;
  double weight_offset = 0.0;
  std::optional<double> partial_fraction;
  EpsPlacement eps_placement = EpsPlacement::kInsideSqrt;
  bool cast_before_weight = false;
  std::optional<ResidualOptions> residual;
};

struct L2NormOptions : CommonOptions {
  std::optional<double> eps;
};

struct BatchNormOptions : CommonOptions {
  std::optional<HostTensor> weight, bias, running_mean, running_var;
  bool training = false;
  std::optional<double> momentum, eps;
  Layout layout = Layout::kChannelsFirst;
};

struct GroupNormOptions : CommonOptions {
  int num_groups = 1;
  std::optional<HostTensor> weight, bias;
  std::optional<double> eps;
  Layout layout = Layout::kChannelsFirst;
};

struct InstanceNormOptions : CommonOptions {
  std::optional<HostTensor> weight, bias, running_mean, running_var;
  std::optional<double> eps;
  // false: per-instance statistics; true: running_mean and running_var instead.
  bool use_running_stats = false;
  Layout layout = Layout::kChannelsFirst;
};

struct QkNormOptions : CommonOptions {
  enum class Kind { kRms, kLayer, kL2 };
  Kind kind = Kind::kRms;
  std::optional<HostTensor> q_weight, k_weight;
  std::optional<double> eps;
};

// What an op returned; the optional parts are set when the op produces them.
struct NormResult {
  HostTensor output;                   // y (QK-norm: q normalized)
  std::optional<HostTensor> k_output;  // QK-norm
  std::optional<HostTensor> residual_sum;
  std::optional<HostTensor> batch_mean, batch_var, running_mean, running_var;
  Backend backend = Backend::kCpu;
  int64_t queue_us = 0, compute_us = 0, total_us = 0;
  int batch_requests = 1;  // requests that shared the server's backend run
};

// The request each typed method sends, for callers that batch them on a NormalizeStream
// or inspect them.
v1::NormalizeRequest MakeRequest(const HostTensor& x, const LayerNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const RmsNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const L2NormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const BatchNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const GroupNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& x, const InstanceNormOptions& o);
v1::NormalizeRequest MakeRequest(const HostTensor& q, const HostTensor& k, const QkNormOptions& o);

// Conversions between HostTensor and the wire tensor.
void ToWire(const HostTensor& t, v1::Tensor* out);
HostTensor FromWire(const v1::Tensor& t);

}  // namespace normd

#endif  // NORMD_CLIENT_REQUESTS_H_
