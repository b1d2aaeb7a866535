#include "server/tensor_checks.h"

#include <cmath>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/field_error.h"
#include "server/shared_memory.h"
#include "server/wire_enums.h"

namespace normd::server {

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t SaturatingProduct(absl::Span<const int64_t> dims) {
  if (absl::c_linear_search(dims, 0)) return 0;
  int64_t p = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(p, d, &p)) return INT64_MAX;
  }
  return p;
}

absl::StatusOr<TensorInfo> CheckTensor(const v1::Tensor& t, absl::string_view field,
                                       const Limits& limits) {
  TensorInfo info;
  absl::StatusOr<kernels::DType> dtype = KernelDType(t.dtype(), absl::StrCat(field, ".dtype"));
  if (!dtype.ok()) return dtype.status();
  info.dtype = *dtype;
  const int rank = t.shape_size();
  if (rank < 1 || rank > limits.max_rank) {
    return InvalidField(absl::StrCat(field, ".shape"), "expected rank 1 to ", limits.max_rank,
                        ", got rank ", rank);
  }
  info.shape.assign(t.shape().begin(), t.shape().end());
  int64_t numel = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = info.shape[i];
    if (d < 0) {
      return InvalidField(absl::StrCat(field, ".shape[", i, "]"), "expected >= 0, got ", d);
    }
    if (__builtin_mul_overflow(numel, d, &numel)) {
      return InvalidField(absl::StrCat(field, ".shape"), "element count of ",
                          ShapeString(info.shape), " overflows int64");
    }
  }
  if (numel > limits.max_elements) {
    return InvalidField(absl::StrCat(field, ".shape"), "expected at most ", limits.max_elements,
                        " elements, got ", numel, " in ", ShapeString(info.shape));
  }
  // With a zero dimension the count is 0 whatever the others are: each is held to the
  // limit too, so that nothing downstream (a row length, a scratch buffer) is sized by a
  // dimension no tensor here could have (the request fuzzer's find: [84, 0, 398458879]).
  for (int i = 0; i < rank; ++i) {
    if (info.shape[i] > limits.max_elements) {
      return InvalidField(absl::StrCat(field, ".shape[", i, "]"), "expected at most ",
                          limits.max_elements, ", got ", info.shape[i]);
    }
  }
  const int64_t want_bytes = numel * kernels::ElementSize(info.dtype);
  info.numel = numel;
  if (t.has_shared_memory()) {
    if (!t.data().empty()) {
      return InvalidField(absl::StrCat(field, ".data"),
                          "expected no bytes with shared_memory set, got ", t.data().size());
    }
    SharedMemoryAccess none(nullptr);
    SharedMemoryAccess* access = limits.shared_memory ? limits.shared_memory : &none;
    absl::StatusOr<const void*> p =
        access->Input(t.shared_memory(), absl::StrCat(field, ".shared_memory"), want_bytes);
    if (!p.ok()) return p.status();
    info.data = *p;
    return info;
  }
  if (static_cast<int64_t>(t.data().size()) != want_bytes) {
    return InvalidField(absl::StrCat(field, ".data"), "expected ", want_bytes, " bytes for ",
                        kernels::DTypeName(info.dtype), " ", ShapeString(info.shape), ", got ",
                        t.data().size());
  }
  info.numel = numel;
  info.data = t.data().data();
  return info;
}

absl::StatusOr<kernels::ConstTensor> CheckParam(const v1::Tensor& t, absl::string_view field,
                                                absl::Span<const int64_t> shape,
                                                kernels::DType input_dtype, const Limits& limits) {
  absl::StatusOr<TensorInfo> info = CheckTensor(t, field, limits);
  if (!info.ok()) return info.status();
  if (info->dtype != kernels::DType::kF32 && info->dtype != input_dtype) {
    return InvalidField(absl::StrCat(field, ".dtype"), "expected F32 or ",
                        kernels::DTypeName(input_dtype), " (the input's dtype), got ",
                        kernels::DTypeName(info->dtype));
  }
  if (!absl::c_equal(info->shape, shape)) {
    return InvalidField(absl::StrCat(field, ".shape"), "expected ", ShapeString(shape), ", got ",
                        ShapeString(info->shape));
  }
  return info->view();
}

absl::Status CheckFinite(double value, absl::string_view field) {
  if (std::isfinite(value)) return absl::OkStatus();
  return InvalidField(field, "expected a finite value, got ", value);
}

absl::Status CheckEps(double eps, absl::string_view field) {
  if (std::isfinite(eps) && eps >= 0) return absl::OkStatus();
  return InvalidField(field, "expected a finite value >= 0, got ", eps);
}

kernels::MutTensor AllocateOutput(v1::Tensor* out, kernels::DType dtype,
                                  absl::Span<const int64_t> shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  out->set_dtype(WireDType(dtype));
  out->mutable_shape()->Assign(shape.begin(), shape.end());
  std::string* data = out->mutable_data();
  data->assign(static_cast<size_t>(numel * kernels::ElementSize(dtype)), '\0');
  return {dtype, data->data(), numel};
}

absl::StatusOr<kernels::MutTensor> PlaceOutput(v1::Tensor* out, kernels::DType dtype,
                                               absl::Span<const int64_t> shape,
                                               const v1::SharedMemoryRef* ref,
                                               const std::string& field, const Limits& limits) {
  if (ref == nullptr) return AllocateOutput(out, dtype, shape);
  const int64_t numel = SaturatingProduct(shape);
  SharedMemoryAccess none(nullptr);
  SharedMemoryAccess* access = limits.shared_memory ? limits.shared_memory : &none;
  absl::StatusOr<void*> p = access->Output(*ref, field, numel * kernels::ElementSize(dtype));
  if (!p.ok()) return p.status();
  out->set_dtype(WireDType(dtype));
  out->mutable_shape()->Assign(shape.begin(), shape.end());
  *out->mutable_shared_memory() = *ref;
  return kernels::MutTensor{dtype, *p, numel};
}

}  // namespace normd::server
