// HostTensor: a small owning tensor (dtype, shape, little-endian bytes) for normd's client
// API. Values are converted to and from float exactly (F16/BF16 rounded to nearest even,
// NaN kept a NaN, overflow of F16 to +-Inf).
// A value type; not synchronized.
//
//   normd::HostTensor x = normd::HostTensor::FromFloats(normd::DType::kBF16, {2, 4}, values);
//   std::vector<float> back = x.ToFloats();
//   x.CopyTo(std::span<float>(my_buffer, 8));        // into the caller's memory
//   std::vector<uint16_t> h = normd::ToF16(values);  // the element conversions alone
#ifndef NORMD_CLIENT_HOST_TENSOR_H_
#define NORMD_CLIENT_HOST_TENSOR_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

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
  // (A std::vector, std::span or absl::Span of floats converts.)
  static HostTensor FromFloats(DType t, std::vector<int64_t> s, std::span<const float> values);
  static HostTensor FromFloats(DType t, std::vector<int64_t> s,
                               std::initializer_list<float> values) {
    return FromFloats(t, std::move(s), std::span<const float>(values.begin(), values.size()));
  }

  // A 1-D tensor of the values.
  static HostTensor FromVector(DType t, std::span<const float> values) {
    return FromFloats(t, {static_cast<int64_t>(values.size())}, values);
  }
  // Elements already in the wire format (F16 or BF16 bits, `t` one of those; kF32 is read
  // as kF16), copied as they are.
  static HostTensor FromBits(DType t, std::vector<int64_t> s, std::span<const uint16_t> bits);

  int64_t numel() const;
  std::vector<float> ToFloats() const;
  // Writes the values as floats into `out`, which must hold numel() of them; false (and
  // nothing written) when it does not.
  bool CopyTo(std::span<float> out) const;
};

// Element conversions, float to F16 or BF16 rounded to nearest even (NaN stays a NaN, F16
// overflow becomes +-Inf), and back exactly. `out` must be as long as `in`.
uint16_t F16FromFloat(float v);
uint16_t BF16FromFloat(float v);
float FloatFromF16(uint16_t bits);
float FloatFromBF16(uint16_t bits);
void ToF16(std::span<const float> in, std::span<uint16_t> out);
void ToBF16(std::span<const float> in, std::span<uint16_t> out);
void FromF16(std::span<const uint16_t> in, std::span<float> out);
void FromBF16(std::span<const uint16_t> in, std::span<float> out);
std::vector<uint16_t> ToF16(std::span<const float> in);
std::vector<uint16_t> ToBF16(std::span<const float> in);

}  // namespace normd

#endif  // NORMD_CLIENT_HOST_TENSOR_H_
