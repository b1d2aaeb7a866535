#include "normd/host_tensor.h"

namespace normd {

HostTensor::HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  bytes.assign(static_cast<size_t>(numel() * kernels::ElementSize(t)), '\0');
}

HostTensor HostTensor::FromFloats(DType t, std::vector<int64_t> s, absl::Span<const float> values) {
  HostTensor out(t, std::move(s));
  const int64_t n = std::min<int64_t>(out.numel(), static_cast<int64_t>(values.size()));
  for (int64_t i = 0; i < n; ++i) kernels::StoreElement(t, out.bytes.data(), i, values[i]);
  return out;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> HostTensor::ToFloats() const {
  const int64_t n = static_cast<int64_t>(bytes.size()) / kernels::ElementSize(dtype);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = kernels::LoadElement(dtype, bytes.data(), i);
  return out;
}

}  // namespace normd
