#include "normd/load/verify.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "normd/kernels/accuracy.h"
#include "normd/kernels/reference.h"

namespace normd {
namespace {

kernels::DType DTypeOf(v1::DataType t) {
  switch (t) {
    case v1::DATA_TYPE_F16:
      return kernels::DType::kF16;
    case v1::DATA_TYPE_BF16:
      return kernels::DType::kBF16;
    default:
      return kernels::DType::kF32;
  }
}

int64_t Numel(const v1::Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d;
  return n;
}

// The request's tensors are checked before the reference reads them.
class Checked {
 public:
  // The wire tensor as a kernel view; absent when the message does not carry it. A
  // present tensor whose bytes do not match its shape (or, with `numel` >= 0, whose
  // element count is not `numel`) marks the request bad.
  kernels::ConstTensor View(bool present, const v1::Tensor& t, const char* what,
                            int64_t numel = -1) {
    if (!present) return {};
    const kernels::DType dtype = DTypeOf(t.dtype());
    const int64_t n = Numel(t);
    if (n < 0 || static_cast<int64_t>(t.data().size()) != n * kernels::ElementSize(dtype) ||
        (numel >= 0 && n != numel)) {
      if (error_.ok()) {
        error_ = absl::InvalidArgumentError(absl::StrCat(what, ": does not fit its shape"));
      }
      return {};
    }
    return {dtype, t.data().data(), n};
  }
  void Require(bool ok, const char* what) {
    if (!ok && error_.ok()) error_ = absl::InvalidArgumentError(absl::StrCat(what, ": invalid"));
  }
  const absl::Status& error() const { return error_; }

 private:
  absl::Status error_;
};

double Or(bool has, double value, double fallback) { return has ? value : fallback; }

kernels::EpsPlacement Eps(v1::EpsPlacement p) {
  return p == v1::EPS_PLACEMENT_OUTSIDE_SQRT ? kernels::EpsPlacement::kOutsideSqrt
                                             : kernels::EpsPlacement::kInsideSqrt;
}

// Rows of `cols` trailing elements of x, and the residual when the op carries one.
kernels::RowNormArgs RowArgs(Checked& c, const v1::Tensor& x, int64_t cols, bool has_residual,
                             const v1::Residual& residual) {
  kernels::RowNormArgs a;
  a.x = c.View(true, x, "input");
  c.Require(cols > 0 && a.x.numel % cols == 0, "input.shape");
  a.cols = cols;
  a.rows = cols <= 0 ? 0 : a.x.numel / cols;
  if (has_residual) {
    a.skip = c.View(true, residual.skip(), "residual.skip", a.x.numel);
    a.alpha = Or(residual.has_alpha(), residual.alpha(), 1.0);
    a.residual = residual.placement() == v1::RESIDUAL_PLACEMENT_NORM_THEN_ADD
                     ? kernels::ResidualPlacement::kNormThenAdd
                     : kernels::ResidualPlacement::kAddThenNorm;
  }
  return a;
}

int64_t LastDim(const v1::Tensor& x) {
  return x.shape_size() == 0 ? 0 : x.shape(x.shape_size() - 1);
}

// [N, C, S] of a channel op's input.
template <class Args>
void SetChannels(Checked& c, const v1::Tensor& x, v1::Layout layout, Args* a) {
  const int rank = x.shape_size();
  c.Require(rank >= 2, "input.shape");
  a->layout = layout == v1::LAYOUT_CHANNELS_LAST ? kernels::Layout::kChannelsLast
                                                 : kernels::Layout::kChannelsFirst;
  if (rank < 2) return;
  const int c_axis = a->layout == kernels::Layout::kChannelsFirst ? 1 : rank - 1;
  a->n = x.shape(0);
  a->c = x.shape(c_axis);
  a->s = 1;
  for (int i = 1; i < rank; ++i) {
    if (i != c_axis) a->s *= x.shape(i);
  }
  a->x = c.View(true, x, "input");
}

// Adds an output that sums terms after normalizing: its values, each element's magnitude M
// and, under cast_before_weight, the values with the other intermediate rounding.
template <class Result>
void AddOutput(ResponseField f, Result& r, Reference* out) {
  out->tensors.emplace_back(f, std::move(r.y));
  out->magnitudes[f] = std::move(r.magnitude);
  if constexpr (requires { r.y_alt; }) {
    if (!r.y_alt.empty()) out->alternatives[f] = std::move(r.y_alt);
  }
}

}  // namespace

const char* FieldName(ResponseField f) {
  switch (f) {
    case ResponseField::kOutput:
      return "output";
    case ResponseField::kKOutput:
      return "k_output";
    case ResponseField::kResidualSum:
      return "residual_sum";
    case ResponseField::kBatchMean:
      return "batch_mean";
    case ResponseField::kBatchVar:
      return "batch_var";
    case ResponseField::kRunningMean:
      return "running_mean";
    case ResponseField::kRunningVar:
      return "running_var";
  }
  return "?";
}

const v1::Tensor& FieldOf(const v1::NormalizeResponse& r, ResponseField f) {
  switch (f) {
    case ResponseField::kOutput:
      return r.output();
    case ResponseField::kKOutput:
      return r.k_output();
    case ResponseField::kResidualSum:
      return r.residual_sum();
    case ResponseField::kBatchMean:
      return r.batch_mean();
    case ResponseField::kBatchVar:
      return r.batch_var();
    case ResponseField::kRunningMean:
      return r.running_mean();
    case ResponseField::kRunningVar:
      return r.running_var();
  }
  return r.output();
}

bool HasField(const v1::NormalizeResponse& r, ResponseField f) {
  switch (f) {
    case ResponseField::kOutput:
      return r.has_output();
    case ResponseField::kKOutput:
      return r.has_k_output();
    case ResponseField::kResidualSum:
      return r.has_residual_sum();
    case ResponseField::kBatchMean:
      return r.has_batch_mean();
    case ResponseField::kBatchVar:
      return r.has_batch_var();
    case ResponseField::kRunningMean:
      return r.has_running_mean();
    case ResponseField::kRunningVar:
      return r.has_running_var();
  }
  return false;
}

absl::StatusOr<Reference> ComputeReference(const v1::NormalizeRequest& request) {
  namespace ref = kernels::reference;
  using F = ResponseField;
  Reference out;
  Checked c;
  const v1::Tensor& x = request.input();
  switch (request.op_case()) {
    case v1::NormalizeRequest::kLayerNorm: {
      const v1::LayerNormParams& p = request.layer_norm();
      const int k = p.normalized_ndim() == 0 ? 1 : p.normalized_ndim();  // default 1
      c.Require(k >= 1 && k <= x.shape_size(), "layer_norm.normalized_ndim");
      int64_t cols = 1;
      for (int i = std::max(0, x.shape_size() - k); i < x.shape_size(); ++i) cols *= x.shape(i);
      kernels::RowNormArgs a = RowArgs(c, x, cols, p.has_residual(), p.residual());
      a.kind = kernels::RowNormKind::kLayer;
      a.weight = c.View(p.has_weight(), p.weight(), "layer_norm.weight", cols);
      a.bias = c.View(p.has_bias(), p.bias(), "layer_norm.bias", cols);
      a.eps = Or(p.has_eps(), p.eps(), 1e-5);
      a.eps_placement = Eps(p.eps_placement());
      if (!c.error().ok()) return c.error();
      ref::RowNormResult r = ref::RowNorm(a);
      AddOutput(F::kOutput, r, &out);
      if (p.residual().return_sum()) out.tensors.emplace_back(F::kResidualSum, std::move(r.h));
      break;
    }
    case v1::NormalizeRequest::kRmsNorm: {
      const v1::RmsNormParams& p = request.rms_norm();
      kernels::RowNormArgs a = RowArgs(c, x, LastDim(x), p.has_residual(), p.residual());
      a.kind = kernels::RowNormKind::kRms;
      a.weight = c.View(p.has_weight(), p.weight(), "rms_norm.weight", LastDim(x));
      a.eps = Or(p.has_eps(), p.eps(), 1e-6);
      a.weight_offset = p.weight_offset();
      a.partial_fraction = Or(p.has_partial_fraction(), p.partial_fraction(), 1.0);
      a.eps_placement = Eps(p.eps_placement());
      a.cast_before_weight = p.cast_before_weight();
      if (!c.error().ok()) return c.error();
      ref::RowNormResult r = ref::RowNorm(a);
      AddOutput(F::kOutput, r, &out);
      if (p.residual().return_sum()) out.tensors.emplace_back(F::kResidualSum, std::move(r.h));
      break;
    }
    case v1::NormalizeRequest::kL2Norm: {
      kernels::RowNormArgs a = RowArgs(c, x, LastDim(x), false, {});
      a.kind = kernels::RowNormKind::kL2;
      a.eps = Or(request.l2_norm().has_eps(), request.l2_norm().eps(), 1e-12);
      if (!c.error().ok()) return c.error();
      ref::RowNormResult r = ref::RowNorm(a);
      AddOutput(F::kOutput, r, &out);
      break;
    }
    case v1::NormalizeRequest::kQkNorm: {
      const v1::QkNormParams& p = request.qk_norm();
      kernels::RowNormKind kind = kernels::RowNormKind::kRms;  // default
      double eps = 1e-6;
      if (p.kind() == v1::QK_NORM_KIND_LAYER) {
        kind = kernels::RowNormKind::kLayer;
        eps = 1e-5;
      } else if (p.kind() == v1::QK_NORM_KIND_L2) {
        kind = kernels::RowNormKind::kL2;
        eps = 1e-12;
      }
      for (const auto& [t, has_w, w, field] :
           {std::tuple{&p.q(), p.has_q_weight(), &p.q_weight(), F::kOutput},
            std::tuple{&p.k(), p.has_k_weight(), &p.k_weight(), F::kKOutput}}) {
        kernels::RowNormArgs a = RowArgs(c, *t, LastDim(*t), false, {});
        a.kind = kind;
        a.eps = Or(p.has_eps(), p.eps(), eps);
        a.weight = c.View(has_w, *w, "qk_norm weight", LastDim(*t));
        if (!c.error().ok()) return c.error();
        ref::RowNormResult r = ref::RowNorm(a);
        AddOutput(field, r, &out);
      }
      break;
    }
    case v1::NormalizeRequest::kBatchNorm: {
      const v1::BatchNormParams& p = request.batch_norm();
      kernels::BatchNormArgs a;
      SetChannels(c, x, p.layout(), &a);
      a.weight = c.View(p.has_weight(), p.weight(), "batch_norm.weight", a.c);
      a.bias = c.View(p.has_bias(), p.bias(), "batch_norm.bias", a.c);
      a.running_mean =
          c.View(p.has_running_mean(), p.running_mean(), "batch_norm.running_mean", a.c);
      a.running_var = c.View(p.has_running_var(), p.running_var(), "batch_norm.running_var", a.c);
      a.training = p.training();
      c.Require(a.training || (a.running_mean.present() && a.running_var.present()),
                "batch_norm.running_mean");
      a.momentum = Or(p.has_momentum(), p.momentum(), 0.1);
      a.eps = Or(p.has_eps(), p.eps(), 1e-5);
      if (!c.error().ok()) return c.error();
      ref::BatchNormResult r = ref::BatchNorm(a);
      AddOutput(F::kOutput, r, &out);
      if (a.training) {
        out.tensors.emplace_back(F::kBatchMean, std::move(r.mean));
        out.tensors.emplace_back(F::kBatchVar, std::move(r.var));
        if (a.running_mean.present()) {
          out.tensors.emplace_back(F::kRunningMean, std::move(r.running_mean));
          out.tensors.emplace_back(F::kRunningVar, std::move(r.running_var));
        }
      }
      break;
    }
    case v1::NormalizeRequest::kGroupNorm: {
      const v1::GroupNormParams& p = request.group_norm();
      kernels::GroupNormArgs a;
      SetChannels(c, x, p.layout(), &a);
      a.groups = p.num_groups();
      c.Require(a.groups > 0 && a.c % a.groups == 0, "group_norm.num_groups");
      a.weight = c.View(p.has_weight(), p.weight(), "group_norm.weight", a.c);
      a.bias = c.View(p.has_bias(), p.bias(), "group_norm.bias", a.c);
      a.eps = Or(p.has_eps(), p.eps(), 1e-5);
      if (!c.error().ok()) return c.error();
      ref::GroupNormResult r = ref::GroupNorm(a);
      AddOutput(F::kOutput, r, &out);
      break;
    }
    case v1::NormalizeRequest::kInstanceNorm: {
      const v1::InstanceNormParams& p = request.instance_norm();
      const double eps = Or(p.has_eps(), p.eps(), 1e-5);
      if (p.use_running_stats()) {  // BatchNorm inference with the running statistics
        kernels::BatchNormArgs a;
        SetChannels(c, x, p.layout(), &a);
        a.weight = c.View(p.has_weight(), p.weight(), "instance_norm.weight", a.c);
        a.bias = c.View(p.has_bias(), p.bias(), "instance_norm.bias", a.c);
        a.running_mean = c.View(true, p.running_mean(), "instance_norm.running_mean", a.c);
        a.running_var = c.View(true, p.running_var(), "instance_norm.running_var", a.c);
        a.eps = eps;
        if (!c.error().ok()) return c.error();
        ref::BatchNormResult r = ref::BatchNorm(a);
        AddOutput(F::kOutput, r, &out);
      } else {  // per-instance statistics: GroupNorm with one channel a group
        kernels::GroupNormArgs a;
        SetChannels(c, x, p.layout(), &a);
        a.groups = a.c;
        a.weight = c.View(p.has_weight(), p.weight(), "instance_norm.weight", a.c);
        a.bias = c.View(p.has_bias(), p.bias(), "instance_norm.bias", a.c);
        a.eps = eps;
        if (!c.error().ok()) return c.error();
        ref::GroupNormResult r = ref::GroupNorm(a);
        AddOutput(F::kOutput, r, &out);
      }
      break;
    }
    case v1::NormalizeRequest::OP_NOT_SET:
      return absl::InvalidArgumentError("the request has no op");
  }
  return out;
}

int64_t Mismatches(const Reference& reference, const v1::NormalizeResponse& response,
                   std::string* first) {
  int64_t bad = 0;
  const auto note = [&](const std::string& what) {
    if (first != nullptr && first->empty()) *first = what;
  };
  for (const auto& [field, values] : reference.tensors) {
    const int64_t n = static_cast<int64_t>(values.size());
    const v1::Tensor& got = FieldOf(response, field);
    const kernels::DType dtype = DTypeOf(got.dtype());
    if (!HasField(response, field) || Numel(got) != n ||
        static_cast<int64_t>(got.data().size()) != n * kernels::ElementSize(dtype)) {
      bad += std::max<int64_t>(n, 1);
      note(absl::StrCat(FieldName(field), ": missing or of the wrong size"));
      continue;
    }
    const kernels::ConstTensor view{dtype, got.data().data(), n};
    for (int64_t i = 0; i < n; ++i) {
      const float y = view.at(i);
      const size_t k = static_cast<size_t>(i);
      if (!kernels::WithinAccuracy(dtype, y, values[i], reference.Magnitude(field, k),
                                   reference.Alternative(field, k))) {
        ++bad;
        note(absl::StrCat(FieldName(field), "[", i, "]: got ", y, ", reference ", values[i]));
      }
    }
  }
  return bad;
}

}  // namespace normd
