// See simd_targets.h.
#include "kernels/cpu/simd_targets.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "hwy/targets.h"

namespace normd::kernels::cpu {

bool CpuHasAvx512Bf16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  // Leaf 7 subleaf 0 gives the highest subleaf in EAX; subleaf 1 exists from 1.
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return false;
  __get_cpuid_count(7, 1, &a, &b, &c, &d);
  return (a >> 5) & 1u;
#else
  return false;
#endif
}

void EnsureSimdTargets() {
  static const bool once = [] {
    if (!CpuHasAvx512Bf16()) hwy::DisableTargets(HWY_AVX3_DL);
    return true;
  }();
  (void)once;
}

}  // namespace normd::kernels::cpu
