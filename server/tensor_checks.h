// Validation and conversion of wire tensors (normd.v1.Tensor) into kernel views, with
// INVALID_ARGUMENT errors that name the field (field_error.h) and give the expected and
// actual values.
// Stateless functions; safe from any thread.
#ifndef NORMD_SERVER_TENSOR_CHECKS_H_
#define NORMD_SERVER_TENSOR_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "normd/kernels/tensor.h"
#include "normd/v1/normd.pb.h"

namespace normd::server {

class SharedMemoryAccess;

struct Limits {
  int max_rank = 8;
  int64_t max_elements = int64_t{1} << 31;
  // Per request (BuildJob sets it): resolves tensors given as shared-memory references;
  // null: a reference is INVALID_ARGUMENT.
  SharedMemoryAccess* shared_memory = nullptr;
};

// A checked wire tensor: its bytes match its dtype and shape.
struct TensorInfo {
  kernels::DType dtype = kernels::DType::kF32;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  const void* data = nullptr;

  kernels::ConstTensor view() const { return {dtype, data, numel}; }
};

std::string ShapeString(absl::Span<const int64_t> shape);

// Product of dims that are each >= 0: 0 if any is 0, INT64_MAX where it would overflow.
// A tensor with a zero dim has numel 0, so products of its *other* dims (spatial size,
// N * S, a trailing normalized shape) are not bounded by CheckTensor's overflow check.
int64_t SaturatingProduct(absl::Span<const int64_t> dims);

// dtype known, rank in [1, max_rank], dims >= 0, element count without overflow and within
// limits, and len(data) == numel * element size.
absl::StatusOr<TensorInfo> CheckTensor(const v1::Tensor& t, absl::string_view field,
                                       const Limits& limits);

// A parameter tensor (weight, bias, running stats): a checked tensor of exactly `shape`,
// dtype F32 or `input_dtype`.
absl::StatusOr<kernels::ConstTensor> CheckParam(const v1::Tensor& t, absl::string_view field,
                                                absl::Span<const int64_t> shape,
                                                kernels::DType input_dtype, const Limits& limits);

// eps must be finite and >= 0.
absl::Status CheckEps(double eps, absl::string_view field);
absl::Status CheckFinite(double value, absl::string_view field);

// Shapes `out` as (dtype, shape) with zeroed bytes and returns a view of those bytes.
kernels::MutTensor AllocateOutput(v1::Tensor* out, kernels::DType dtype,
                                  absl::Span<const int64_t> shape);
// The same, or, with `ref`, in shared memory: `out` then carries dtype, shape and the
// reference, and the view points into the region (`field`: the reference's request field).
absl::StatusOr<kernels::MutTensor> PlaceOutput(v1::Tensor* out, kernels::DType dtype,
                                               absl::Span<const int64_t> shape,
                                               const v1::SharedMemoryRef* ref,
                                               const std::string& field, const Limits& limits);

}  // namespace normd::server

#endif  // NORMD_SERVER_TENSOR_CHECKS_H_
