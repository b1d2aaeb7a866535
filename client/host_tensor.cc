#include "normd/host_tensor.h"

#include <algorithm>

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

HostTensor HostTensor::FromFloats(DType t, std::vector<int64_t> s, absl::Span<const float> values) {
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

std::vector<float> HostTensor::ToFloats() const {
  const int64_t n = static_cast<int64_t>(bytes.size()) / ElementSize(dtype);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = kernels::LoadElement(Kernel(dtype), bytes.data(), i);
  return out;
}

}  // namespace normd
