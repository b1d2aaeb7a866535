#include "kernels/bench/memory_probe.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/bench/bench_inputs.h"
#include "kernels/bench/bench_timing.h"

namespace normd::kernels::bench {
namespace {

// Median seconds per call of fn over five batches of at least min_time / 5 seconds.
double MedianPerCall(const std::function<void()>& fn, double min_time) {
  const int64_t iters = Calibrate(fn, min_time / 5);
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) t.push_back(TimeBatch(fn, iters));
  std::sort(t.begin(), t.end());
  return t[2];
}

// One load a 64-byte line: the memory system's rate of bringing lines in, not the core's
// rate of adding words (a load a word would be bound by the loop in cache).
uint64_t TouchLines(const unsigned char* p, size_t bytes) {
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes; i += 64) {
    uint64_t w;
    std::memcpy(&w, p + i, sizeof(w));
    sum += w;
  }
  return sum;
}

}  // namespace

std::vector<MemoryProbe> ProbeMemory(const std::vector<size_t>& sizes, double min_time) {
  std::vector<MemoryProbe> out;
  for (const size_t bytes : sizes) {
    PageBytes src = AllocatePageAligned(bytes), dst = AllocatePageAligned(bytes);
    std::memset(src.get(), 1, bytes);
    std::memset(dst.get(), 0, bytes);
    const double copy = MedianPerCall([&] { std::memcpy(dst.get(), src.get(), bytes); }, min_time);
    // volatile: the sum must be formed, or the loop is dead code.
    volatile uint64_t sink = 0;
    const double read =
        MedianPerCall([&] { sink = sink + TouchLines(src.get(), bytes); }, min_time);
    out.push_back({bytes, 2.0 * static_cast<double>(bytes) / copy / 1e9,
                   static_cast<double>(bytes) / read / 1e9});
  }
  return out;
}

}  // namespace normd::kernels::bench
