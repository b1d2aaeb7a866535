// HostTensor: a small owning tensor (dtype, shape, little-endian bytes) for normd's client
// API. Values are converted to and from float exactly (F16/BF16 rounded to nearest even,
// NaN kept a NaN, overflow of F16 to +-Inf).
// A value type; not synchronized.
//
//   normd::HostTensor x = normd::HostTensor::FromFloats(normd::DType::kBF16, {2, 4}, values);
//   std::vector<float> back = x.ToFloats();
#ifndef NORMD_CLIENT_HOST_TENSOR_H_
#define NORMD_CLIENT_HOST_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace normd {

// Element types on the wire (normd.v1.DataType).
enum class DType : uint8_t { kF32, kF16, kBF16 };

// Bytes an element of `t` takes: 4 or 2.
int ElementSize(DType t);
// "F32", "F16" or "BF16".
const char* DTypeName(DType t);

struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string bytes;

  HostTensor() = default;
  // Zero-filled tensor of the given shape.
  HostTensor(DType t, std::vector<int64_t> s);
  // The first numel() values, rounded to `t`; missing values stay 0.
  static HostTensor FromFloats(DType t, std::vector<int64_t> s, absl::Span<const float> values);

  int64_t numel() const;
  std::vector<float> ToFloats() const;
};

}  // namespace normd

#endif  // NORMD_CLIENT_HOST_TENSOR_H_
