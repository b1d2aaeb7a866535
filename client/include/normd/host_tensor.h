// HostTensor: a small owning tensor (dtype, shape, little-endian bytes) for normd's client
// API. Values are converted to and from float exactly (F16/BF16 rounded to nearest even).
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
#include "normd/kernels/dtype.h"

namespace normd {

using DType = kernels::DType;

struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string bytes;

  HostTensor() = default;
  // Zero-filled tensor of the given shape.
  HostTensor(DType t, std::vector<int64_t> s);
  static HostTensor FromFloats(DType t, std::vector<int64_t> s, absl::Span<const float> values);

  int64_t numel() const;
  std::vector<float> ToFloats() const;
};

}  // namespace normd

#endif  // NORMD_CLIENT_HOST_TENSOR_H_
