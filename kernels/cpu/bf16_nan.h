// NaN parameters for bf16 outputs: the kernels round fp32 to bf16 without a select for NaN
// (convert-inl.h, RoundBF16Bits), which is exact only for NaNs that are quiet with their low
// 16 bits zero. Every NaN a kernel stores carries the payload of one operand, and the only
// operands that can hold other NaNs are the caller's fp32 parameters (weight, bias, running
// statistics, alpha); the entry points pass those, or the fp32 coefficients made from them,
// through BF16SafeNaN for bf16 outputs. On AVX3_DL the conversion is AVX512_BF16's, exact
// for every NaN, and the row ops skip their scan for them (BF16StoresKeepNaNs, nan_scan.cc).
// Stateless; safe from any thread.
#ifndef NORMD_KERNELS_CPU_BF16_NAN_H_
#define NORMD_KERNELS_CPU_BF16_NAN_H_

#include <cstdint>
#include <cstring>

namespace normd::kernels::cpu {

// f unchanged, or where it is a NaN, the quiet NaN with f's upper 16 bits and zero low ones:
// an fp32 operation on either returns a NaN whose bf16 rounding (BF16FromF32, dtype.h) is the
// same bits, and RoundBF16Bits is exact for the second.
inline float BF16SafeNaN(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) u = (u & 0xffff0000u) | 0x00400000u;
  std::memcpy(&f, &u, sizeof u);
  return f;
}

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_BF16_NAN_H_
