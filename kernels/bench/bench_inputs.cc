#include "kernels/bench/bench_inputs.h"

#include <algorithm>
#include <cstdlib>
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

PageBytes AllocatePageAligned(size_t bytes) {
  constexpr size_t kPage = 4096;
  // aligned_alloc wants a whole number of pages; a zero-byte request still gets one.
  const size_t size = (bytes + kPage) / kPage * kPage;
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(kPage, size));
  if (p == nullptr) std::abort();  // a benchmark with no memory has nothing to measure
  return PageBytes(p);
}

}  // namespace normd::kernels::bench
