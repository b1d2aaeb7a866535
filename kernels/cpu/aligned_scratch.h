// A growable, vector-aligned float buffer that the CPU kernels keep per thread (row
// buffers, widened parameters), so that a call allocates only when it needs more room than
// any call before it on that thread. Not thread-safe: each thread owns its own.
#ifndef NORMD_KERNELS_CPU_ALIGNED_SCRATCH_H_
#define NORMD_KERNELS_CPU_ALIGNED_SCRATCH_H_

#include <cstddef>

#include "hwy/aligned_allocator.h"

namespace normd::kernels::cpu {

class AlignedScratch {
 public:
  // At least n floats, aligned as hwy::AllocateAligned's; earlier contents are not kept
  // when it grows.
  float* Reserve(size_t n) {
    if (capacity_ < n) {
      data_ = hwy::AllocateAligned<float>(n);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  hwy::AlignedFreeUniquePtr<float[]> data_;
  size_t capacity_ = 0;
};

}  // namespace normd::kernels::cpu

#endif  // NORMD_KERNELS_CPU_ALIGNED_SCRATCH_H_
