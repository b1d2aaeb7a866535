// Element types of normd tensors and exact conversions between them and float.
//
// Highway 1.0.3's BF16FromF32 truncates and it has no scalar F16 conversion, so the
// round-to-nearest-even conversions live here. Header-only and stateless: safe from any
// thread.
//
//   float f = normd::kernels::LoadElement(DType::kBF16, bytes, i);
//   uint16_t h = normd::kernels::F16FromF32(1.5f);
#ifndef NORMD_KERNELS_DTYPE_H_
#define NORMD_KERNELS_DTYPE_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace normd::kernels {

enum class DType : uint8_t { kF32, kF16, kBF16 };

inline constexpr int ElementSize(DType t) { return t == DType::kF32 ? 4 : 2; }

inline constexpr const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

inline float F32FromBF16(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// Round to nearest even; NaN stays a (quiet) NaN, Inf stays Inf.
inline uint16_t BF16FromF32(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float F32FromF16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24 is exact in float.
  const float mag = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -mag : mag;
}

// Round to nearest even; overflow gives +-Inf; NaN stays a (quiet) NaN.
inline uint16_t F16FromF32(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to Inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: add 0.5 so the FPU's own round-to-nearest-even
    // places the bits (0.5 has ulp 2^-24, the f16 subnormal step).
    const float r = std::bit_cast<float>(abs) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(r) - 0x3f000000u);
  }
  uint32_t m = abs + 0xc8000fffu + ((abs >> 13) & 1u);  // rebias exponent (-112 << 23), round
  return sign | static_cast<uint16_t>(m >> 13);
}

// The 16-bit pattern of f rounded to t (F16 or BF16), and the value of such a pattern.
inline uint16_t HalfBits(DType t, float f) {
  return t == DType::kF16 ? F16FromF32(f) : BF16FromF32(f);
}
inline float HalfValue(DType t, uint16_t b) {
  return t == DType::kF16 ? F32FromF16(b) : F32FromBF16(b);
}

// Reads element i of a little-endian buffer of type t as float (exact).
inline float LoadElement(DType t, const void* data, int64_t i) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return HalfValue(t, h);
}

// Writes f rounded (nearest even) to type t as element i.
inline void StoreElement(DType t, void* data, int64_t i, float f) {
  auto* p = static_cast<unsigned char*>(data);
  if (t == DType::kF32) {
    std::memcpy(p + 4 * i, &f, 4);
    return;
  }
  const uint16_t h = HalfBits(t, f);
  std::memcpy(p + 2 * i, &h, 2);
}

// Rounds f to the nearest value representable in t (f itself for F32).
inline float RoundTo(DType t, float f) {
  if (t == DType::kF32) return f;
  return HalfValue(t, HalfBits(t, f));
}

}  // namespace normd::kernels

#endif  // NORMD_KERNELS_DTYPE_H_
