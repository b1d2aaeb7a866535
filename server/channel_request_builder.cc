// Validation and Job building for the per-channel ops: BatchNorm, GroupNorm, InstanceNorm.
#include "absl/strings/str_cat.h"
#include "server/request_builder.h"

namespace normd::server {
namespace {

using kernels::Layout;

// [N, C, *] or [N, *, C] resolved into N, C and the spatial size S.
struct ChannelShape {
  int64_t n = 0, c = 0, s = 1;
  Layout layout = Layout::kChannelsFirst;
};

absl::StatusOr<ChannelShape> ResolveChannels(const TensorInfo& x, v1::Layout layout,
                                             absl::string_view op) {
  ChannelShape cs;
  switch (layout) {
    case v1::CHANNELS_FIRST:
      cs.layout = Layout::kChannelsFirst;
      break;
    case v1::CHANNELS_LAST:
      cs.layout = Layout::kChannelsLast;
      break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          op, ".layout: expected CHANNELS_FIRST or CHANNELS_LAST, got ", static_cast<int>(layout)));
  }
  const size_t rank = x.shape.size();
  if (rank < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input.shape: expected rank >= 2 ([N, C, *] or [N, *, C]) for ", op, ", got ",
                     ShapeString(x.shape)));
  }
  cs.n = x.shape[0];
  const size_t c_axis = cs.layout == Layout::kChannelsFirst ? 1 : rank - 1;
  cs.c = x.shape[c_axis];
  std::vector<int64_t> spatial;
  for (size_t i = 1; i < rank; ++i) {
    if (i != c_axis) spatial.push_back(x.shape[i]);
  }
  cs.s = SaturatingProduct(spatial);
  return cs;
}

// Optional per-channel parameter.
absl::Status OptionalParam(bool present, const v1::Tensor& t, absl::string_view field,
                           const TensorInfo& x, int64_t c, const Limits& limits,
                           kernels::ConstTensor* out) {
  if (!present) return absl::OkStatus();
  absl::StatusOr<kernels::ConstTensor> v = CheckParam(t, field, {c}, x.dtype, limits);
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

// running_mean and running_var: both or neither; `required` demands both.
absl::Status RunningStats(const v1::Tensor* mean, const v1::Tensor* var, bool has_mean,
                          bool has_var, bool required, absl::string_view op, absl::string_view why,
                          const TensorInfo& x, int64_t c, const Limits& limits,
                          kernels::BatchNormArgs* a) {
  if (required || has_mean || has_var) {
    for (const auto& [has, name] :
         {std::pair{has_mean, "running_mean"}, std::pair{has_var, "running_var"}}) {
      if (!has) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, ".", name, ": required ", why, ", got no tensor"));
      }
    }
  }
  if (!has_mean) return absl::OkStatus();
  absl::Status s =
      OptionalParam(true, *mean, absl::StrCat(op, ".running_mean"), x, c, limits, &a->running_mean);
  if (!s.ok()) return s;
  return OptionalParam(true, *var, absl::StrCat(op, ".running_var"), x, c, limits, &a->running_var);
}

}  // namespace

absl::Status BuildBatchNorm(const BuildContext& ctx, Job* job) {
  const v1::BatchNormParams& p = ctx.request.batch_norm();
  absl::StatusOr<TensorInfo> x = CheckTensor(ctx.request.input(), "input", ctx.limits);
  if (!x.ok()) return x.status();
  absl::StatusOr<ChannelShape> cs = ResolveChannels(*x, p.layout(), "batch_norm");
  if (!cs.ok()) return cs.status();
  kernels::BatchNormArgs& a = job->batch;
  a.n = cs->n;
  a.c = cs->c;
  a.s = cs->s;
  a.layout = cs->layout;
  a.x = x->view();
  a.training = p.training();
  if (a.training && SaturatingProduct({a.n, a.s}) <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.shape: Expected more than 1 value per channel when training, got input size ",
        ShapeString(x->shape)));
  }
  if (absl::Status s = OptionalParam(p.has_weight(), p.weight(), "batch_norm.weight", *x, a.c,
                                     ctx.limits, &a.weight);
      !s.ok())
    return s;
  if (absl::Status s =
          OptionalParam(p.has_bias(), p.bias(), "batch_norm.bias", *x, a.c, ctx.limits, &a.bias);
      !s.ok())
    return s;
  absl::Status s = RunningStats(
      &p.running_mean(), &p.running_var(), p.has_running_mean(), p.has_running_var(), !a.training,
      "batch_norm", a.training ? "with the other running stat" : "when training = false", *x, a.c,
      ctx.limits, &a);
  if (!s.ok()) return s;
  a.momentum = p.has_momentum() ? p.momentum() : kernels::kDefaultBatchNormMomentum;
  if (s = CheckFinite(a.momentum, "batch_norm.momentum"); !s.ok()) return s;
  a.eps = p.has_eps() ? p.eps() : kernels::kDefaultBatchNormEps;
  if (s = CheckEps(a.eps, "batch_norm.eps"); !s.ok()) return s;

  v1::NormalizeResponse* r = ctx.response;
  a.y = AllocateOutput(r->mutable_output(), ctx.output_dtype.value_or(x->dtype), x->shape);
  if (a.training) {
    a.batch_mean = AllocateOutput(r->mutable_batch_mean(), kernels::DType::kF32, {a.c});
    a.batch_var = AllocateOutput(r->mutable_batch_var(), kernels::DType::kF32, {a.c});
    if (a.running_mean.present()) {
      a.running_mean_out = AllocateOutput(r->mutable_running_mean(), a.running_mean.dtype, {a.c});
      a.running_var_out = AllocateOutput(r->mutable_running_var(), a.running_var.dtype, {a.c});
    }
  }
  job->family = Job::Family::kBatchNorm;
  job->input_bytes = x->numel * kernels::ElementSize(x->dtype);
  job->empty = x->numel == 0;
  return absl::OkStatus();
}

absl::Status BuildGroupNorm(const BuildContext& ctx, Job* job) {
  const v1::GroupNormParams& p = ctx.request.group_norm();
  absl::StatusOr<TensorInfo> x = CheckTensor(ctx.request.input(), "input", ctx.limits);
  if (!x.ok()) return x.status();
  absl::StatusOr<ChannelShape> cs = ResolveChannels(*x, p.layout(), "group_norm");
  if (!cs.ok()) return cs.status();
  kernels::GroupNormArgs& a = job->group;
  a.n = cs->n;
  a.c = cs->c;
  a.s = cs->s;
  a.layout = cs->layout;
  a.groups = p.num_groups();
  if (a.groups <= 0 || a.c % a.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group_norm.num_groups: Expected number of channels in input to be divisible by "
        "num_groups, but got input of shape ",
        ShapeString(x->shape), " and num_groups=", p.num_groups()));
  }
  a.x = x->view();
  if (absl::Status s = OptionalParam(p.has_weight(), p.weight(), "group_norm.weight", *x, a.c,
                                     ctx.limits, &a.weight);
      !s.ok())
    return s;
  if (absl::Status s =
          OptionalParam(p.has_bias(), p.bias(), "group_norm.bias", *x, a.c, ctx.limits, &a.bias);
      !s.ok())
    return s;
  a.eps = p.has_eps() ? p.eps() : kernels::kDefaultBatchNormEps;
  if (absl::Status s = CheckEps(a.eps, "group_norm.eps"); !s.ok()) return s;
  a.y =
      AllocateOutput(ctx.response->mutable_output(), ctx.output_dtype.value_or(x->dtype), x->shape);
  job->family = Job::Family::kGroupNorm;
  job->input_bytes = x->numel * kernels::ElementSize(x->dtype);
  job->empty = x->numel == 0;
  return absl::OkStatus();
}

absl::Status BuildInstanceNorm(const BuildContext& ctx, Job* job) {
  const v1::InstanceNormParams& p = ctx.request.instance_norm();
  absl::StatusOr<TensorInfo> x = CheckTensor(ctx.request.input(), "input", ctx.limits);
  if (!x.ok()) return x.status();
  absl::StatusOr<ChannelShape> cs = ResolveChannels(*x, p.layout(), "instance_norm");
  if (!cs.ok()) return cs.status();
  const bool use_input_stats = !p.no_input_stats();
  if (use_input_stats && cs->s <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.shape: Expected more than 1 spatial element when training, got input size ",
        ShapeString(x->shape)));
  }
  const kernels::DType out_dtype = ctx.output_dtype.value_or(x->dtype);
  job->input_bytes = x->numel * kernels::ElementSize(x->dtype);
  job->empty = x->numel == 0;
  kernels::ConstTensor weight, bias;
  if (absl::Status s = OptionalParam(p.has_weight(), p.weight(), "instance_norm.weight", *x, cs->c,
                                     ctx.limits, &weight);
      !s.ok())
    return s;
  if (absl::Status s =
          OptionalParam(p.has_bias(), p.bias(), "instance_norm.bias", *x, cs->c, ctx.limits, &bias);
      !s.ok())
    return s;
  const double eps = p.has_eps() ? p.eps() : kernels::kDefaultBatchNormEps;
  if (absl::Status s = CheckEps(eps, "instance_norm.eps"); !s.ok()) return s;
  if (use_input_stats) {
    // Running stats, if sent, are not used with input statistics (and not updated).
    kernels::GroupNormArgs& a = job->group;
    a.n = cs->n;
    a.c = cs->c;
    a.s = cs->s;
    a.layout = cs->layout;
    a.groups = cs->c == 0 ? 1 : cs->c;
    a.x = x->view();
    a.weight = weight;
    a.bias = bias;
    a.eps = eps;
    a.y = AllocateOutput(ctx.response->mutable_output(), out_dtype, x->shape);
    job->family = Job::Family::kGroupNorm;
    return absl::OkStatus();
  }
  // With running statistics InstanceNorm is BatchNorm inference.
  kernels::BatchNormArgs& a = job->batch;
  a.n = cs->n;
  a.c = cs->c;
  a.s = cs->s;
  a.layout = cs->layout;
  a.x = x->view();
  a.weight = weight;
  a.bias = bias;
  a.eps = eps;
  a.training = false;
  absl::Status s =
      RunningStats(&p.running_mean(), &p.running_var(), p.has_running_mean(), p.has_running_var(),
                   true, "instance_norm", "with no_input_stats", *x, cs->c, ctx.limits, &a);
  if (!s.ok()) return s;
  a.y = AllocateOutput(ctx.response->mutable_output(), out_dtype, x->shape);
  job->family = Job::Family::kBatchNorm;
  return absl::OkStatus();
}

}  // namespace normd::server
