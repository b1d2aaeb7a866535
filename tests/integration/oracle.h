// Checks a server's answer against the float64 reference, built from the request alone:
// the wire tensors are read here, and every default is written out here as
// docs/semantics.md states it, without the server's parser (BuildJob). A default the
// server misreads therefore shows up as a mismatch instead of cancelling out. Every
// returned tensor is compared under the accuracy rule (tests/kernels/test_util.h).
// Not thread-safe (gtest assertions).
#ifndef NORMD_TESTS_INTEGRATION_ORACLE_H_
#define NORMD_TESTS_INTEGRATION_ORACLE_H_

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "normd/kernels/reference.h"
#include "normd/v1/normd.pb.h"
#include "tests/kernels/test_util.h"

namespace normd::testing {
namespace oracle_internal {

inline kernels::DType DTypeOf(v1::DataType t) {
  switch (t) {
    case v1::DATA_TYPE_F16:
      return kernels::DType::kF16;
    case v1::DATA_TYPE_BF16:
      return kernels::DType::kBF16;
    default:
      return kernels::DType::kF32;
  }
}

inline int64_t Numel(const v1::Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d;
  return n;
}

// The wire tensor as a kernel view; absent when the message does not carry it.
inline kernels::ConstTensor View(bool present, const v1::Tensor& t) {
  if (!present) return {};
  return {DTypeOf(t.dtype()), t.data().data(), Numel(t)};
}

inline double Or(bool has, double value, double fallback) { return has ? value : fallback; }

inline kernels::EpsPlacement Eps(v1::EpsPlacement p) {
  return p == v1::EPS_PLACEMENT_OUTSIDE_SQRT ? kernels::EpsPlacement::kOutsideSqrt
                                             : kernels::EpsPlacement::kInsideSqrt;
}

// Rows of `cols` trailing elements of x, and the residual when the op carries one.
inline kernels::RowNormArgs RowArgs(const v1::Tensor& x, int64_t cols, bool has_residual,
                                    const v1::Residual& residual) {
  kernels::RowNormArgs a;
  a.x = View(true, x);
  a.cols = cols;
  a.rows = cols == 0 ? 0 : a.x.numel / cols;
  if (has_residual) {
    a.skip = View(true, residual.skip());
    a.alpha = Or(residual.has_alpha(), residual.alpha(), 1.0);
    a.residual = residual.placement() == v1::RESIDUAL_PLACEMENT_NORM_THEN_ADD
                     ? kernels::ResidualPlacement::kNormThenAdd
                     : kernels::ResidualPlacement::kAddThenNorm;
  }
  return a;
}

// [N, C, S] of a channel op's input.
struct ChannelDims {
  int64_t n = 0, c = 0, s = 1;
  kernels::Layout layout = kernels::Layout::kChannelsFirst;
};
inline ChannelDims Channels(const v1::Tensor& x, v1::Layout layout) {
  ChannelDims d;
  const int rank = x.shape_size();
  d.layout = layout == v1::LAYOUT_CHANNELS_LAST ? kernels::Layout::kChannelsLast
                                                : kernels::Layout::kChannelsFirst;
  const int c_axis = d.layout == kernels::Layout::kChannelsFirst ? 1 : rank - 1;
  d.n = x.shape(0);
  d.c = x.shape(c_axis);
  for (int i = 1; i < rank; ++i) {
    if (i != c_axis) d.s *= x.shape(i);
  }
  return d;
}

template <class Args>
void SetChannels(const ChannelDims& d, const v1::Tensor& x, Args* a) {
  a->n = d.n;
  a->c = d.c;
  a->s = d.s;
  a->layout = d.layout;
  a->x = View(true, x);
}

}  // namespace oracle_internal

inline void ExpectTensorMatches(const v1::Tensor& got, const std::vector<double>& ref,
                                const std::string& what) {
  const kernels::DType dtype = oracle_internal::DTypeOf(got.dtype());
  const int64_t numel = oracle_internal::Numel(got);
  ASSERT_EQ(static_cast<int64_t>(got.data().size()), numel * kernels::ElementSize(dtype)) << what;
  ASSERT_EQ(numel, static_cast<int64_t>(ref.size())) << what;
  Buffer b(dtype, numel);
  std::memcpy(b.bytes.data(), got.data().data(), got.data().size());
  ExpectAllMatch(b, ref, what);
}

inline void ExpectMatchesOracle(const v1::NormalizeRequest& request,
                                const v1::NormalizeResponse& got, const std::string& what) {
  using namespace oracle_internal;  // NOLINT: the helpers above, local to this function
  namespace ref = kernels::reference;
  EXPECT_EQ(got.id(), request.id()) << what;
  ASSERT_FALSE(got.has_error()) << what << ": " << got.error().message();
  const v1::Tensor& x = request.input();
  switch (request.op_case()) {
    case v1::NormalizeRequest::kLayerNorm: {
      const v1::LayerNormParams& p = request.layer_norm();
      const int k = p.normalized_ndim() == 0 ? 1 : p.normalized_ndim();  // default 1
      int64_t cols = 1;
      for (int i = x.shape_size() - k; i < x.shape_size(); ++i) cols *= x.shape(i);
      kernels::RowNormArgs a = RowArgs(x, cols, p.has_residual(), p.residual());
      a.kind = kernels::RowNormKind::kLayer;
      a.weight = View(p.has_weight(), p.weight());
      a.bias = View(p.has_bias(), p.bias());
      a.eps = Or(p.has_eps(), p.eps(), 1e-5);
      a.eps_placement = Eps(p.eps_placement());
      const ref::RowNormResult r = ref::RowNorm(a);
      ExpectTensorMatches(got.output(), r.y, what + " y");
      if (p.residual().return_sum()) ExpectTensorMatches(got.residual_sum(), r.h, what + " h");
      break;
    }
    case v1::NormalizeRequest::kRmsNorm: {
      const v1::RmsNormParams& p = request.rms_norm();
      kernels::RowNormArgs a =
          RowArgs(x, x.shape(x.shape_size() - 1), p.has_residual(), p.residual());
      a.kind = kernels::RowNormKind::kRms;
      a.weight = View(p.has_weight(), p.weight());
      a.eps = Or(p.has_eps(), p.eps(), 1e-6);
      a.weight_offset = p.weight_offset();
      a.partial_fraction = Or(p.has_partial_fraction(), p.partial_fraction(), 1.0);
      a.eps_placement = Eps(p.eps_placement());
      a.cast_before_weight = p.cast_before_weight();
      const ref::RowNormResult r = ref::RowNorm(a);
      ExpectTensorMatches(got.output(), r.y, what + " y");
      if (p.residual().return_sum()) ExpectTensorMatches(got.residual_sum(), r.h, what + " h");
      break;
    }
    case v1::NormalizeRequest::kL2Norm: {
      kernels::RowNormArgs a = RowArgs(x, x.shape(x.shape_size() - 1), false, {});
      a.kind = kernels::RowNormKind::kL2;
      a.eps = Or(request.l2_norm().has_eps(), request.l2_norm().eps(), 1e-12);
      ExpectTensorMatches(got.output(), ref::RowNorm(a).y, what + " y");
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
      for (const auto& [t, has_w, w, out, name] :
           {std::tuple{&p.q(), p.has_q_weight(), &p.q_weight(), &got.output(), " q"},
            std::tuple{&p.k(), p.has_k_weight(), &p.k_weight(), &got.k_output(), " k"}}) {
        kernels::RowNormArgs a = RowArgs(*t, t->shape(t->shape_size() - 1), false, {});
        a.kind = kind;
        a.eps = Or(p.has_eps(), p.eps(), eps);
        a.weight = View(has_w, *w);
        ExpectTensorMatches(*out, ref::RowNorm(a).y, what + name);
      }
      break;
    }
    case v1::NormalizeRequest::kBatchNorm: {
      const v1::BatchNormParams& p = request.batch_norm();
      kernels::BatchNormArgs a;
      SetChannels(Channels(x, p.layout()), x, &a);
      a.weight = View(p.has_weight(), p.weight());
      a.bias = View(p.has_bias(), p.bias());
      a.running_mean = View(p.has_running_mean(), p.running_mean());
      a.running_var = View(p.has_running_var(), p.running_var());
      a.training = p.training();
      a.momentum = Or(p.has_momentum(), p.momentum(), 0.1);
      a.eps = Or(p.has_eps(), p.eps(), 1e-5);
      const ref::BatchNormResult r = ref::BatchNorm(a);
      ExpectTensorMatches(got.output(), r.y, what + " y");
      if (a.training) {
        ExpectTensorMatches(got.batch_mean(), r.mean, what + " mean");
        ExpectTensorMatches(got.batch_var(), r.var, what + " var");
        if (a.running_mean.present()) {
          ExpectTensorMatches(got.running_mean(), r.running_mean, what + " running_mean");
          ExpectTensorMatches(got.running_var(), r.running_var, what + " running_var");
        }
      }
      break;
    }
    case v1::NormalizeRequest::kGroupNorm: {
      const v1::GroupNormParams& p = request.group_norm();
      kernels::GroupNormArgs a;
      SetChannels(Channels(x, p.layout()), x, &a);
      a.groups = p.num_groups();
      a.weight = View(p.has_weight(), p.weight());
      a.bias = View(p.has_bias(), p.bias());
      a.eps = Or(p.has_eps(), p.eps(), 1e-5);
      ExpectTensorMatches(got.output(), ref::GroupNorm(a), what + " y");
      break;
    }
    case v1::NormalizeRequest::kInstanceNorm: {
      const v1::InstanceNormParams& p = request.instance_norm();
      const ChannelDims d = Channels(x, p.layout());
      const double eps = Or(p.has_eps(), p.eps(), 1e-5);
      if (p.use_running_stats()) {  // BatchNorm inference with the running statistics
        kernels::BatchNormArgs a;
        SetChannels(d, x, &a);
        a.weight = View(p.has_weight(), p.weight());
        a.bias = View(p.has_bias(), p.bias());
        a.running_mean = View(true, p.running_mean());
        a.running_var = View(true, p.running_var());
        a.eps = eps;
        ExpectTensorMatches(got.output(), ref::BatchNorm(a).y, what + " y");
      } else {  // per-instance statistics: GroupNorm with one channel a group
        kernels::GroupNormArgs a;
        SetChannels(d, x, &a);
        a.groups = d.c;
        a.weight = View(p.has_weight(), p.weight());
        a.bias = View(p.has_bias(), p.bias());
        a.eps = eps;
        ExpectTensorMatches(got.output(), ref::GroupNorm(a), what + " y");
      }
      break;
    }
    case v1::NormalizeRequest::OP_NOT_SET:
      FAIL() << what << ": the request has no op";
  }
}

}  // namespace normd::testing

#endif  // NORMD_TESTS_INTEGRATION_ORACLE_H_
