// Validation and Job building for the per-channel ops: BatchNorm, GroupNorm, InstanceNorm.
#include "absl/strings/str_cat.h"
#include "normd/common/status_macros.h"
#include "server/field_error.h"
#include "server/request_builder.h"
#include "server/wire_enums.h"

namespace normd::server {
namespace {

using kernels::Layout;

// What every per-channel op checks the same way: the input as [N, C, *] or [N, *, C],
// optional weight[C] and bias[C], and eps.
struct ChannelInputs {
  TensorInfo x;
  int64_t n = 0, c = 0, s = 1;
  Layout layout = Layout::kChannelsFirst;
  kernels::ConstTensor weight, bias;
  double eps = kernels::kDefaultBatchNormEps;
};

absl::Status OptionalParam(bool present, const v1::Tensor& t, absl::string_view field,
                           const ChannelInputs& in, const Limits& limits,
                           kernels::ConstTensor* out) {
  if (!present) return absl::OkStatus();
  NORMD_ASSIGN_OR_RETURN(*out, CheckParam(t, field, {in.c}, in.x.dtype, limits));
  return absl::OkStatus();
}

// Params is one of BatchNormParams, GroupNormParams, InstanceNormParams (same field names).
template <class Params>
absl::StatusOr<ChannelInputs> CheckChannelInputs(const BuildContext& ctx, const Params& p,
                                                 absl::string_view op) {
  ChannelInputs in;
  NORMD_ASSIGN_OR_RETURN(in.x, CheckTensor(ctx.request.input(), "input", ctx.limits));
  NORMD_ASSIGN_OR_RETURN(in.layout, KernelLayout(p.layout(), absl::StrCat(op, ".layout")));
  const std::vector<int64_t>& shape = in.x.shape;
  if (shape.size() < 2) {
    return InvalidField("input.shape", "expected rank >= 2 ([N, C, *] or [N, *, C]) for ", op,
                        ", got ", ShapeString(shape));
  }
  const size_t c_axis = in.layout == Layout::kChannelsFirst ? 1 : shape.size() - 1;
  in.n = shape[0];
  in.c = shape[c_axis];
  std::vector<int64_t> spatial;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (i != c_axis) spatial.push_back(shape[i]);
  }
  in.s = SaturatingProduct(spatial);
  NORMD_RETURN_IF_ERROR(OptionalParam(p.has_weight(), p.weight(), absl::StrCat(op, ".weight"), in,
                                      ctx.limits, &in.weight));
  NORMD_RETURN_IF_ERROR(
      OptionalParam(p.has_bias(), p.bias(), absl::StrCat(op, ".bias"), in, ctx.limits, &in.bias));
  in.eps = p.has_eps() ? p.eps() : kernels::kDefaultBatchNormEps;
  NORMD_RETURN_IF_ERROR(CheckEps(in.eps, absl::StrCat(op, ".eps")));
  return in;
}

// running_mean and running_var [C]: both or neither, and both when `required`.
template <class Params>
absl::Status CheckRunningStats(const Params& p, bool required, absl::string_view op,
                               absl::string_view why, const ChannelInputs& in, const Limits& limits,
                               kernels::BatchNormArgs* a) {
  if (required || p.has_running_mean() || p.has_running_var()) {
    for (const auto& [has, name] : {std::pair{p.has_running_mean(), "running_mean"},
                                    std::pair{p.has_running_var(), "running_var"}}) {
      if (!has) {
        return InvalidField(absl::StrCat(op, ".", name), "required ", why, ", got no tensor");
      }
    }
  }
  NORMD_RETURN_IF_ERROR(OptionalParam(p.has_running_mean(), p.running_mean(),
                                      absl::StrCat(op, ".running_mean"), in, limits,
                                      &a->running_mean));
  return OptionalParam(p.has_running_var(), p.running_var(), absl::StrCat(op, ".running_var"), in,
                       limits, &a->running_var);
}

template <class Args>
absl::Status SetCommon(const BuildContext& ctx, const ChannelInputs& in, Args* a) {
  a->n = in.n;
  a->c = in.c;
  a->s = in.s;
  a->layout = in.layout;
  a->x = in.x.view();
  a->weight = in.weight;
  a->bias = in.bias;
  a->eps = in.eps;
  const v1::NormalizeRequest& r = ctx.request;
  NORMD_ASSIGN_OR_RETURN(
      a->y,
      PlaceOutput(ctx.response->mutable_output(), ctx.output_dtype.value_or(in.x.dtype), in.x.shape,
                  r.has_output_shared_memory() ? &r.output_shared_memory() : nullptr,
                  "output_shared_memory", ctx.limits));
  return absl::OkStatus();
}

void Finish(const ChannelInputs& in, Job::Family family, Job* job) {
  job->family = family;
  job->input_bytes = in.x.numel * kernels::ElementSize(in.x.dtype);
  job->empty = in.x.numel == 0;
}

}  // namespace

absl::Status BuildBatchNorm(const BuildContext& ctx, Job* job) {
  const v1::BatchNormParams& p = ctx.request.batch_norm();
  NORMD_ASSIGN_OR_RETURN(const ChannelInputs in, CheckChannelInputs(ctx, p, "batch_norm"));
  kernels::BatchNormArgs& a = job->batch;
  a.training = p.training();
  if (a.training && SaturatingProduct({in.n, in.s}) <= 1) {
    return InvalidField("input.shape",
                        "Expected more than 1 value per channel when training, got input size ",
                        ShapeString(in.x.shape));
  }
  NORMD_RETURN_IF_ERROR(CheckRunningStats(
      p, !a.training, "batch_norm",
      a.training ? "with the other running stat" : "when training = false", in, ctx.limits, &a));
  a.momentum = p.has_momentum() ? p.momentum() : kernels::kDefaultBatchNormMomentum;
  NORMD_RETURN_IF_ERROR(CheckFinite(a.momentum, "batch_norm.momentum"));
  NORMD_RETURN_IF_ERROR(SetCommon(ctx, in, &a));
  if (a.training) {
    v1::NormalizeResponse* r = ctx.response;
    a.batch_mean = AllocateOutput(r->mutable_batch_mean(), kernels::DType::kF32, {a.c});
    a.batch_var = AllocateOutput(r->mutable_batch_var(), kernels::DType::kF32, {a.c});
    if (a.running_mean.present()) {
      a.running_mean_out = AllocateOutput(r->mutable_running_mean(), a.running_mean.dtype, {a.c});
      a.running_var_out = AllocateOutput(r->mutable_running_var(), a.running_var.dtype, {a.c});
    }
  }
  Finish(in, Job::Family::kBatchNorm, job);
  return absl::OkStatus();
}

absl::Status BuildGroupNorm(const BuildContext& ctx, Job* job) {
  const v1::GroupNormParams& p = ctx.request.group_norm();
  NORMD_ASSIGN_OR_RETURN(const ChannelInputs in, CheckChannelInputs(ctx, p, "group_norm"));
  if (p.num_groups() <= 0 || in.c % p.num_groups() != 0) {
    return InvalidField("group_norm.num_groups",
                        "Expected number of channels in input to be divisible by num_groups, but "
                        "got input of shape ",
                        ShapeString(in.x.shape), " and num_groups=", p.num_groups());
  }
  job->group.groups = p.num_groups();
  NORMD_RETURN_IF_ERROR(SetCommon(ctx, in, &job->group));
  Finish(in, Job::Family::kGroupNorm, job);
  return absl::OkStatus();
}

absl::Status BuildInstanceNorm(const BuildContext& ctx, Job* job) {
  const v1::InstanceNormParams& p = ctx.request.instance_norm();
  NORMD_ASSIGN_OR_RETURN(const ChannelInputs in, CheckChannelInputs(ctx, p, "instance_norm"));
  if (!p.use_running_stats()) {
    if (in.s <= 1) {
      return InvalidField("input.shape",
                          "Expected more than 1 spatial element when training, got input size ",
                          ShapeString(in.x.shape));
    }
    // GroupNorm with one channel per group. Running stats, if sent, are neither used nor
    // updated with input statistics.
    job->group.groups = in.c == 0 ? 1 : in.c;
    NORMD_RETURN_IF_ERROR(SetCommon(ctx, in, &job->group));
    Finish(in, Job::Family::kGroupNorm, job);
    return absl::OkStatus();
  }
  // With running statistics InstanceNorm is BatchNorm inference.
  kernels::BatchNormArgs& a = job->batch;
  a.training = false;
  NORMD_RETURN_IF_ERROR(
      CheckRunningStats(p, true, "instance_norm", "with use_running_stats", in, ctx.limits, &a));
  NORMD_RETURN_IF_ERROR(SetCommon(ctx, in, &a));
  Finish(in, Job::Family::kBatchNorm, job);
  return absl::OkStatus();
}

}  // namespace normd::server
