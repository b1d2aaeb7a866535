#include "kernels/bench/bench_inputs.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace normd::kernels::bench {

void FillNormal(DType t, void* bytes, int64_t n, uint32_t seed) {
  unsigned char* b = static_cast<unsigned char*>(bytes);
  const size_t esize = ElementSize(t);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.5f, 2.0f);
  const int64_t pattern = std::min<int64_t>(n, 1 << 16);
  for (int64_t i = 0; i < pattern; ++i) StoreElement(t, b, i, dist(rng));
  for (int64_t i = pattern; i < n; i += pattern) {
    std::memcpy(b + i * esize, b, static_cast<size_t>(std::min(pattern, n - i)) * esize);
  }
}

}  // namespace normd::kernels::bench
