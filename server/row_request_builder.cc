// Validation and Job building for the row-wise ops: LayerNorm, RMSNorm, L2Norm, QK-norm.
#include <cmath>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "normd/common/status_macros.h"
#include "server/field_error.h"
#include "server/request_builder.h"
#include "server/wire_enums.h"

namespace normd::server {
namespace {

using kernels::EpsPlacement;
using kernels::ResidualPlacement;
using kernels::RowNormArgs;
using kernels::RowNormKind;

// Fills the input, output and residual parts of `a` for a row norm over the trailing
// `cols` elements of `x`; `prefix` is the op's field name.
absl::Status SetRowIo(const BuildContext& ctx, const TensorInfo& x, int64_t cols,
                      const v1::Residual* residual, absl::string_view prefix, RowNormArgs* a,
                      v1::Tensor* y_out, bool k_output = false) {
  a->cols = cols;
  a->rows = cols == 0 ? 0 : x.numel / cols;
  a->x = x.view();
  const v1::NormalizeRequest& r = ctx.request;
  const v1::SharedMemoryRef* y_ref =
      k_output ? (r.has_k_output_shared_memory() ? &r.k_output_shared_memory() : nullptr)
               : (r.has_output_shared_memory() ? &r.output_shared_memory() : nullptr);
  NORMD_ASSIGN_OR_RETURN(
      a->y, PlaceOutput(y_out, ctx.output_dtype.value_or(x.dtype), x.shape, y_ref,
                        k_output ? "k_output_shared_memory" : "output_shared_memory", ctx.limits));
  if (residual == nullptr) return absl::OkStatus();
  const std::string field = absl::StrCat(prefix, ".residual");
  NORMD_ASSIGN_OR_RETURN(TensorInfo skip,
                         CheckTensor(residual->skip(), field + ".skip", ctx.limits));
  if (skip.shape != x.shape) {
    return InvalidField(field + ".skip.shape", "expected ", ShapeString(x.shape),
                        " (the input's shape), got ", ShapeString(skip.shape));
  }
  if (skip.dtype != x.dtype) {
    return InvalidField(field + ".skip.dtype", "expected ", kernels::DTypeName(x.dtype),
                        " (the input's dtype), got ", kernels::DTypeName(skip.dtype));
  }
  a->skip = skip.view();
  a->alpha = residual->has_alpha() ? residual->alpha() : 1.0;
  NORMD_RETURN_IF_ERROR(CheckFinite(a->alpha, field + ".alpha"));
  NORMD_ASSIGN_OR_RETURN(a->residual,
                         KernelResidualPlacement(residual->placement(), field + ".placement"));
  if (residual->return_sum()) {
    if (a->residual != ResidualPlacement::kAddThenNorm) {
      return InvalidField(field + ".return_sum",
                          "expected false with RESIDUAL_PLACEMENT_NORM_THEN_ADD (there is no "
                          "sum h to return), got true");
    }
    // Only now: a response carries residual_sum only when it was asked for.
    NORMD_ASSIGN_OR_RETURN(
        a->h,
        PlaceOutput(ctx.response->mutable_residual_sum(), x.dtype, x.shape,
                    r.has_residual_sum_shared_memory() ? &r.residual_sum_shared_memory() : nullptr,
                    "residual_sum_shared_memory", ctx.limits));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorInfo> Input(const BuildContext& ctx) {
  return CheckTensor(ctx.request.input(), "input", ctx.limits);
}

void Finish(const TensorInfo& x, Job* job) {
  job->family = Job::Family::kRowNorm;
  job->input_bytes = x.numel * kernels::ElementSize(x.dtype);
  job->empty = x.numel == 0;
}

}  // namespace

absl::Status BuildLayerNorm(const BuildContext& ctx, Job* job) {
  const v1::LayerNormParams& p = ctx.request.layer_norm();
  NORMD_ASSIGN_OR_RETURN(TensorInfo x, Input(ctx));
  const int rank = static_cast<int>(x.shape.size());
  const int k = p.normalized_ndim() == 0 ? 1 : p.normalized_ndim();
  if (k < 1 || k > rank) {
    return InvalidField("layer_norm.normalized_ndim", "expected 1 to ", rank,
                        " (the input's rank), got ", p.normalized_ndim());
  }
  const absl::Span<const int64_t> normalized(x.shape.data() + rank - k, k);
  RowNormArgs& a = job->row;
  a.kind = RowNormKind::kLayer;
  for (const auto& [present, tensor, name, out] :
       {std::tuple{p.has_weight(), &p.weight(), "weight", &a.weight},
        std::tuple{p.has_bias(), &p.bias(), "bias", &a.bias}}) {
    if (!present) continue;
    const std::string field = absl::StrCat("layer_norm.", name);
    NORMD_ASSIGN_OR_RETURN(TensorInfo t, CheckTensor(*tensor, field, ctx.limits));
    if (!absl::c_equal(t.shape, normalized)) {
      // PyTorch's wording, where the parameter's shape is the normalized_shape.
      return InvalidField(field, "Given normalized_shape=", ShapeString(t.shape),
                          ", expected input with shape [*, ", absl::StrJoin(t.shape, ", "),
                          "], but got input of size ", ShapeString(x.shape));
    }
    NORMD_ASSIGN_OR_RETURN(kernels::ConstTensor v,
                           CheckParam(*tensor, field, normalized, x.dtype, ctx.limits));
    *out = v;
  }
  a.eps = p.has_eps() ? p.eps() : kernels::kDefaultLayerNormEps;
  NORMD_RETURN_IF_ERROR(CheckEps(a.eps, "layer_norm.eps"));
  NORMD_ASSIGN_OR_RETURN(EpsPlacement placement,
                         KernelEpsPlacement(p.eps_placement(), "layer_norm.eps_placement"));
  a.eps_placement = placement;
  NORMD_RETURN_IF_ERROR(SetRowIo(ctx, x, SaturatingProduct(normalized),
                                 p.has_residual() ? &p.residual() : nullptr, "layer_norm", &a,
                                 ctx.response->mutable_output()));
  Finish(x, job);
  return absl::OkStatus();
}

absl::Status BuildRmsNorm(const BuildContext& ctx, Job* job) {
  const v1::RmsNormParams& p = ctx.request.rms_norm();
  NORMD_ASSIGN_OR_RETURN(TensorInfo x, Input(ctx));
  const int64_t d = x.shape.back();
  RowNormArgs& a = job->row;
  a.kind = RowNormKind::kRms;
  if (p.has_weight()) {
    NORMD_ASSIGN_OR_RETURN(kernels::ConstTensor w,
                           CheckParam(p.weight(), "rms_norm.weight", {d}, x.dtype, ctx.limits));
    a.weight = w;
  }
  a.eps = p.has_eps() ? p.eps() : kernels::kDefaultRmsNormEps;
  NORMD_RETURN_IF_ERROR(CheckEps(a.eps, "rms_norm.eps"));
  a.weight_offset = p.weight_offset();
  NORMD_RETURN_IF_ERROR(CheckFinite(a.weight_offset, "rms_norm.weight_offset"));
  if (a.weight_offset != 0 && !p.has_weight()) {
    return InvalidField("rms_norm.weight",
                        "required when weight_offset is set (got weight_offset=", a.weight_offset,
                        " and no weight)");
  }
  a.partial_fraction = p.has_partial_fraction() ? p.partial_fraction() : 1.0;
  if (!(a.partial_fraction > 0 && a.partial_fraction <= 1)) {
    return InvalidField("rms_norm.partial_fraction", "expected a value in (0, 1], got ",
                        a.partial_fraction);
  }
  NORMD_ASSIGN_OR_RETURN(EpsPlacement placement,
                         KernelEpsPlacement(p.eps_placement(), "rms_norm.eps_placement"));
  a.eps_placement = placement;
  a.cast_before_weight = p.cast_before_weight();
  NORMD_RETURN_IF_ERROR(SetRowIo(ctx, x, d, p.has_residual() ? &p.residual() : nullptr, "rms_norm",
                                 &a, ctx.response->mutable_output()));
  Finish(x, job);
  return absl::OkStatus();
}

absl::Status BuildL2Norm(const BuildContext& ctx, Job* job) {
  const v1::L2NormParams& p = ctx.request.l2_norm();
  NORMD_ASSIGN_OR_RETURN(TensorInfo x, Input(ctx));
  RowNormArgs& a = job->row;
  a.kind = RowNormKind::kL2;
  a.eps = p.has_eps() ? p.eps() : kernels::kDefaultL2NormEps;
  NORMD_RETURN_IF_ERROR(CheckEps(a.eps, "l2_norm.eps"));
  NORMD_RETURN_IF_ERROR(
      SetRowIo(ctx, x, x.shape.back(), nullptr, "l2_norm", &a, ctx.response->mutable_output()));
  Finish(x, job);
  return absl::OkStatus();
}

absl::Status BuildQkNorm(const BuildContext& ctx, Job* job) {
  const v1::QkNormParams& p = ctx.request.qk_norm();
  if (ctx.request.has_input()) {
    return InvalidField("input",
                        "expected unset for qk_norm (qk_norm.q and qk_norm.k carry the tensors), "
                        "got a tensor");
  }
  NORMD_ASSIGN_OR_RETURN(const RowNormKind kind, KernelQkKind(p.kind(), "qk_norm.kind"));
  const double default_eps = kind == RowNormKind::kRms     ? kernels::kDefaultRmsNormEps
                             : kind == RowNormKind::kLayer ? kernels::kDefaultLayerNormEps
                                                           : kernels::kDefaultL2NormEps;
  const double eps = p.has_eps() ? p.eps() : default_eps;
  NORMD_RETURN_IF_ERROR(CheckEps(eps, "qk_norm.eps"));
  int64_t bytes = 0;
  bool empty = true;
  for (const auto& [tensor, weight, has_weight, name, a, out] :
       {std::tuple{&p.q(), &p.q_weight(), p.has_q_weight(), "q", &job->row,
                   ctx.response->mutable_output()},
        std::tuple{&p.k(), &p.k_weight(), p.has_k_weight(), "k", &job->row_k,
                   ctx.response->mutable_k_output()}}) {
    NORMD_ASSIGN_OR_RETURN(TensorInfo t,
                           CheckTensor(*tensor, absl::StrCat("qk_norm.", name), ctx.limits));
    const int64_t head_dim = t.shape.back();
    a->kind = kind;
    a->eps = eps;
    if (has_weight) {
      const std::string field = absl::StrCat("qk_norm.", name, "_weight");
      NORMD_ASSIGN_OR_RETURN(TensorInfo w, CheckTensor(*weight, field, ctx.limits));
      if (w.shape != std::vector<int64_t>{head_dim}) {
        return InvalidField(field + ".shape", "expected [", head_dim, "] (head_dim of ", name, " ",
                            ShapeString(t.shape), "), got ", ShapeString(w.shape));
      }
      NORMD_ASSIGN_OR_RETURN(kernels::ConstTensor v,
                             CheckParam(*weight, field, {head_dim}, t.dtype, ctx.limits));
      a->weight = v;
    }
    NORMD_RETURN_IF_ERROR(SetRowIo(ctx, t, head_dim, nullptr, "qk_norm", a, out,
                                   out == ctx.response->mutable_k_output()));
    bytes += t.numel * kernels::ElementSize(t.dtype);
    empty = empty && t.numel == 0;
  }
  job->family = Job::Family::kQkNorm;
  job->input_bytes = bytes;
  job->empty = empty;
  return absl::OkStatus();
}

}  // namespace normd::server
