// The size of this core's L2 cache, for rules that size a pass's working set against it
// (how much of the next row a long row's epilogue prefetches, row_norm_simd.cc).
// Thread-safe: computed once (a function-local static).
#ifndef NORMD_KERNELS_CPU_CACHE_SIZE_H_
#define NORMD_KERNELS_CPU_CACHE_SIZE_H_

#include <unistd.h>

#include <cstdint>

namespace normd::kernels::cpu {

// Bytes of L2 per core as the C library reports it (glibc reads CPUID on x86), or 0 where
// it does not say (some Arm systems): callers then keep their conservative choice.
inline int64_t L2CacheBytes() {
  static const int64_t bytes = [] {
#ifdef _SC_LEVEL2_CACHE_SIZE
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<int64_t>(v) : int64_t{0};
#else
    return int64_t{0};
#endif
  }();
  return bytes;
}

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_CACHE_SIZE_H_
