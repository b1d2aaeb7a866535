// The SIMD targets the CPU kernels may dispatch to. Highway's AVX3_DL target, as the
// kernels build it, also uses AVX512_BF16 (convert-inl.h), which Highway's own detection
// of AVX3_DL does not ask for: NORMD_DISPATCH takes AVX3_DL out of the dispatch on CPUs
// without it (Ice Lake, Tiger Lake), which then run AVX3, before the first call.
// Thread-safe: the check runs once, under a function-local static's guard.
#ifndef NORMD_KERNELS_CPU_SIMD_TARGETS_H_
#define NORMD_KERNELS_CPU_SIMD_TARGETS_H_

#include "hwy/highway.h"

namespace normd::kernels::cpu {

// Whether this CPU executes AVX512_BF16 instructions (CPUID leaf 7, subleaf 1, EAX bit 5).
bool CpuHasAvx512Bf16();

// Disables Highway's AVX3_DL target, once, where CpuHasAvx512Bf16() is false.
void EnsureSimdTargets();

}  // namespace normd::kernels::cpu

// HWY_DYNAMIC_DISPATCH for the kernels' SIMD entry points.
#define NORMD_DISPATCH(fn) (::normd::kernels::cpu::EnsureSimdTargets(), HWY_DYNAMIC_DISPATCH(fn))

#endif  // NORMD_KERNELS_CPU_SIMD_TARGETS_H_
