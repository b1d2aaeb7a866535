#include "normd/host_tensor.h"

#include <algorithm>
#include <cstring>

// The kernels room's header-only conversions, used privately: the client's public headers
// expose no kernels type, and one definition of the rounding serves both sides.
#include "normd/kernels/dtype.h"

namespace normd {
namespace {

kernels::DType Kernel(DType t) {
  switch (t) {
    case DType::kF32:
      return kernels::DType::kF32;
    case DType::kF16:
      return kernels::DType::kF16;
    case DType::kBF16:
      return kernels::DType::kBF16;
  }
  return kernels::DType::kF32;
}

}  // namespace

int ElementSize(DType t) { return t == DType::kF32 ? 4 : 2; }

const char* DTypeName(DType t) { return kernels::DTypeName(Kernel(t)); }

HostTensor::HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  bytes.assign(static_cast<size_t>(numel() * ElementSize(t)), '\0');
}

HostTensor HostTensor::FromFloats(DType t, std::vector<int64_t> s, std::span<const float> values) {
  HostTensor out(t, std::move(s));
  const int64_t n = std::min<int64_t>(out.numel(), static_cast<int64_t>(values.size()));
  for (int64_t i = 0; i < n; ++i) kernels::StoreElement(Kernel(t), out.bytes.data(), i, values[i]);
  return out;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor HostTensor::FromBits(DType t, std::vector<int64_t> s, std::span<const uint16_t> bits) {
  HostTensor out(t == DType::kF32 ? DType::kF16 : t, std::move(s));
  std::memcpy(out.bytes.data(), bits.data(),
              std::min(out.bytes.size(), bits.size() * sizeof(uint16_t)));
  return out;
}

bool HostTensor::CopyTo(std::span<float> out) const {
  const int64_t n = static_cast<int64_t>(bytes.size()) / ElementSize(dtype);
  if (static_cast<int64_t>(out.size()) != n) return false;
  for (int64_t i = 0; i < n; ++i) out[i] = kernels::LoadElement(Kernel(dtype), bytes.data(), i);
  return true;
}

uint16_t F16FromFloat(float v) { return kernels::F16FromF32(v); }
uint16_t BF16FromFloat(float v) { return kernels::BF16FromF32(v); }
float FloatFromF16(uint16_t bits) { return kernels::F32FromF16(bits); }
float FloatFromBF16(uint16_t bits) { return kernels::F32FromBF16(bits); }

void ToF16(std::span<const float> in, std::span<uint16_t> out) {
  for (size_t i = 0; i < std::min(in.size(), out.size()); ++i) out[i] = F16FromFloat(in[i]);
}
void ToBF16(std::span<const float> in, std::span<uint16_t> out) {
  for (size_t i = 0; i < std::min(in.size(), out.size()); ++i) out[i] = BF16FromFloat(in[i]);
}
void FromF16(std::span<const uint16_t> in, std::span<float> out) {
  for (size_t i = 0; i < std::min(in.size(), out.size()); ++i) out[i] = FloatFromF16(in[i]);
}
void FromBF16(std::span<const uint16_t> in, std::span<float> out) {
  for (size_t i = 0; i < std::min(in.size(), out.size()); ++i) out[i] = FloatFromBF16(in[i]);
}
std::vector<uint16_t> ToF16(std::span<const float> in) {
  std::vector<uint16_t> out(in.size());
  ToF16(in, out);
  return out;
}
std::vector<uint16_t> ToBF16(std::span<const float> in) {
  std::vector<uint16_t> out(in.size());
  ToBF16(in, out);
  return out;
}

std::vector<float> HostTensor::ToFloats() const {
  const int64_t n = static_cast<int64_t>(bytes.size()) / ElementSize(dtype);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = kernels::LoadElement(Kernel(dtype), bytes.data(), i);
  return out;
}

}  // namespace normd
