#include "kernels/bench/memory_probe.h"

#include <cstdint>
#include <cstring>

#include "kernels/bench/bench_inputs.h"
#include "kernels/bench/bench_timing.h"

namespace normd::kernels::bench {
namespace {

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
    // volatile: the sum must be formed, or the loop is dead code. The read and the copy in
    // alternating batches, as the cases and their memcpy (bench_timing.h).
    volatile uint64_t sink = 0;
    const PairTiming t =
        TimeAgainstCopy([&] { sink = sink + TouchLines(src.get(), bytes); },
                        [&] { std::memcpy(dst.get(), src.get(), bytes); }, min_time);
    out.push_back({bytes, 2.0 * static_cast<double>(bytes) / t.copy / 1e9,
                   static_cast<double>(bytes) / t.kernel / 1e9});
  }
  return out;
}

}  // namespace normd::kernels::bench
