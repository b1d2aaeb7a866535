#include "normd/requests.h"

namespace normd {
namespace {

v1::DataType WireDType(DType t) {
  switch (t) {
    case DType::kF32:
      return v1::DATA_TYPE_F32;
    case DType::kF16:
      return v1::DATA_TYPE_F16;
    case DType::kBF16:
      return v1::DATA_TYPE_BF16;
  }
  return v1::DATA_TYPE_UNSPECIFIED;
}

v1::EpsPlacement WireEps(EpsPlacement p) {
  return p == EpsPlacement::kInsideSqrt ? v1::EPS_PLACEMENT_INSIDE_SQRT
                                        : v1::EPS_PLACEMENT_OUTSIDE_SQRT;
}
v1::Layout WireLayout(Layout l) {
  return l == Layout::kChannelsFirst ? v1::LAYOUT_CHANNELS_FIRST : v1::LAYOUT_CHANNELS_LAST;
}

void SetCommon(const CommonOptions& o, v1::NormalizeRequest* r) {
  r->set_backend(o.backend == Backend::kCpu    ? v1::BACKEND_CPU
                 : o.backend == Backend::kCuda ? v1::BACKEND_CUDA
                                               : v1::BACKEND_UNSPECIFIED);
  if (o.output_dtype) r->set_output_dtype(WireDType(*o.output_dtype));
}

void SetResidual(const std::optional<ResidualOptions>& r, v1::Residual* out) {
  ToWire(r->skip, out->mutable_skip());
  out->set_alpha(r->alpha);
  out->set_placement(r->placement == ResidualOptions::Placement::kAddThenNorm
                         ? v1::RESIDUAL_PLACEMENT_ADD_THEN_NORM
                         : v1::RESIDUAL_PLACEMENT_NORM_THEN_ADD);
  out->set_return_sum(r->return_sum);
}

}  // namespace

void ToWire(const HostTensor& t, v1::Tensor* out) {
  out->set_dtype(WireDType(t.dtype));
  out->mutable_shape()->Assign(t.shape.begin(), t.shape.end());
  out->set_data(t.bytes);
}

HostTensor FromWire(const v1::Tensor& t) {
  HostTensor out;
  out.dtype = t.dtype() == v1::DATA_TYPE_F16    ? DType::kF16
              : t.dtype() == v1::DATA_TYPE_BF16 ? DType::kBF16
                                                : DType::kF32;
  out.shape.assign(t.shape().begin(), t.shape().end());
  out.bytes = t.data();
  return out;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const LayerNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::LayerNormParams* p = r.mutable_layer_norm();
  p->set_normalized_ndim(o.normalized_ndim);
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.eps) p->set_eps(*o.eps);
  p->set_eps_placement(WireEps(o.eps_placement));
  if (o.residual) SetResidual(o.residual, p->mutable_residual());
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const RmsNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::RmsNormParams* p = r.mutable_rms_norm();
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.eps) p->set_eps(*o.eps);
  p->set_weight_offset(o.weight_offset);
  if (o.partial_fraction) p->set_partial_fraction(*o.partial_fraction);
  p->set_eps_placement(WireEps(o.eps_placement));
  p->set_cast_before_weight(o.cast_before_weight);
  if (o.residual) SetResidual(o.residual, p->mutable_residual());
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const L2NormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::L2NormParams* p = r.mutable_l2_norm();
  if (o.eps) p->set_eps(*o.eps);
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const BatchNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::BatchNormParams* p = r.mutable_batch_norm();
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.running_mean) ToWire(*o.running_mean, p->mutable_running_mean());
  if (o.running_var) ToWire(*o.running_var, p->mutable_running_var());
  p->set_training(o.training);
  if (o.momentum) p->set_momentum(*o.momentum);
  if (o.eps) p->set_eps(*o.eps);
  p->set_layout(WireLayout(o.layout));
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const GroupNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::GroupNormParams* p = r.mutable_group_norm();
  p->set_num_groups(o.num_groups);
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.eps) p->set_eps(*o.eps);
  p->set_layout(WireLayout(o.layout));
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& x, const InstanceNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  ToWire(x, r.mutable_input());
  v1::InstanceNormParams* p = r.mutable_instance_norm();
  if (o.weight) ToWire(*o.weight, p->mutable_weight());
  if (o.bias) ToWire(*o.bias, p->mutable_bias());
  if (o.running_mean) ToWire(*o.running_mean, p->mutable_running_mean());
  if (o.running_var) ToWire(*o.running_var, p->mutable_running_var());
  if (o.eps) p->set_eps(*o.eps);
  p->set_use_running_stats(o.use_running_stats);
  p->set_layout(WireLayout(o.layout));
  return r;
}

v1::NormalizeRequest MakeRequest(const HostTensor& q, const HostTensor& k, const QkNormOptions& o) {
  v1::NormalizeRequest r;
  SetCommon(o, &r);
  v1::QkNormParams* p = r.mutable_qk_norm();
  ToWire(q, p->mutable_q());
  ToWire(k, p->mutable_k());
  p->set_kind(o.kind == QkNormOptions::Kind::kRms     ? v1::QK_NORM_KIND_RMS
              : o.kind == QkNormOptions::Kind::kLayer ? v1::QK_NORM_KIND_LAYER
                                                      : v1::QK_NORM_KIND_L2);
  if (o.q_weight) ToWire(*o.q_weight, p->mutable_q_weight());
  if (o.k_weight) ToWire(*o.k_weight, p->mutable_k_weight());
  if (o.eps) p->set_eps(*o.eps);
  return r;
}

}  // namespace normd
