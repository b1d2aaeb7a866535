// The alignment our programs' global operator new gives large blocks (common/aligned_new.cc,
// the object library normd_aligned_new, linked into normd, normbench, normctl and its test:
// a replacement of operator new is the whole program's, so the libraries, the client
// library included, never link it). Constants only; safe from any thread.
#ifndef NORMD_COMMON_ALIGNED_NEW_H_
#define NORMD_COMMON_ALIGNED_NEW_H_

#include <cstddef>

#include "normd/common/process_tuning.h"

namespace normd {

// From this size a block starts on a kLargeBlockAlignment boundary: tensors from four rows of
// 4096 f32 up, and every chunk of the client's chunked calls (256 KiB). Below it malloc's
// placement and speed are kept (aligned_alloc carves the block out of a larger one and
// frees the rest), for gRPC's and protobuf's many small objects and for small requests,
// whose call costs tens of microseconds beside the kernel's fraction of one.
inline constexpr std::size_t kAlignFromBytes = 64 << 10;
inline constexpr std::size_t kLargeBlockAlignment = 64;

// From this size a block starts on a 2 MiB boundary and its whole 2 MiB pages are advised
// for transparent huge pages (madvise MADV_HUGEPAGE, where the kernel has them): glibc maps
// such blocks on their own (TuneProcessForMessages' mmap threshold) and every one is faulted
// in afresh, a 64 MiB tensor 16384 faults of 4 KiB, 32 of 2 MiB. The advice lasts as long as
// the mapping, which glibc unmaps when the block is freed.
inline constexpr std::size_t kHugePageAdviceBytes = kOwnMappingBytes;
inline constexpr std::size_t kHugePageBytes = 2 << 20;

}  // namespace normd

#endif  // NORMD_COMMON_ALIGNED_NEW_H_
