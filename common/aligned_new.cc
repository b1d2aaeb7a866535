// Our programs' replacement of the global operator new and delete: a block of
// kAlignFromBytes or more starts on a 64-byte boundary (a cache line, and AVX-512's vector);
// smaller ones are malloc's as before. Linked into the executables that move tensors
// (aligned_new.h names them), so every library in the process, protobuf's parse and the
// client library's answers included, allocates through it; never into a library.
//
// Why: a request's tensors reach the kernels as parsed protobuf `bytes` fields, std::string
// buffers from operator new, and glibc's malloc puts a large block 16 bytes past a page
// (smaller ones at any multiple of 16). The kernels read rows with unaligned vector loads, and
// on the Zen 5 VM a pass that only reads ran at 0.63-0.67 of memcpy with its input 16, 32 or
// 48 bytes past a cache line against 0.91-1.06 on one; `normd-kernel-bench --offset 16`
// (every buffer where the server's would be) put RMSNorm f32 at 4096x4096 at 0.72 of memcpy
// against 0.95 aligned, LayerNorm f32 at 0.52 against 0.67 (BENCHMARKS.md, issue 16,
// fortieth session). Outputs are std::string buffers too, and aligned they need no head
// before their streaming stores. The aligned-new forms (std::align_val_t) stay libstdc++'s;
// every form here frees with free(), as those do.
//
// Blocks of kHugePageAdviceBytes or more (a unary call's tensor, parsed or answered) are also
// advised for transparent huge pages before first use: glibc maps each on its own, so each
// call faults its pages in afresh, and on the VM of BENCHMARKS.md's seventy-third session a
// fault cost 11.5 us: a 64 MiB unary LayerNorm took 0.87-1.08 s, 0.34-0.49 s with the advice.
// Such blocks start on a huge page (posix_memalign): where glibc placed them, 4 KiB past a
// page boundary, a 4 MiB tensor held one whole huge page and faulted the rest in 4 KiB pages
// (about 1000 faults a 4 MiB unary call; BENCHMARKS.md, issue 15, seventy-sixth session).
// The clients receive such blocks too: every answer normbench's loops take is a fresh
// response, and a 4 MiB one faulted its pages in on every call; at eight callers of 4 MiB
// LayerNorm calls glibc's arenas and mappings cost normbench 500-1000 faults a call and
// held it to 76-116 calls a second, 122-152 with this allocator (BENCHMARKS.md, issue 15,
// seventy-seventh session).
//
// Thread safety: as malloc's.
#include "normd/common/aligned_new.h"

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

// The whole huge pages of [p, p + n) advised for transparent huge pages, before anything
// touches them (kHugePageAdviceBytes). Only advice: a kernel without THP refuses it and
// nothing changes; in THP mode `never` the pages stay small; a block that came from an arena
// after all (another mmap threshold) only marks that part of the heap.
void AdviseHugePages(void* p, std::size_t n) {
#ifdef MADV_HUGEPAGE
  using normd::kHugePageBytes;
  const uintptr_t begin =
      (reinterpret_cast<uintptr_t>(p) + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(kHugePageBytes - 1);
  if (end > begin) {
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
#else
  (void)p;
  (void)n;
#endif
}

void* Allocate(std::size_t n) {
  using normd::kAlignFromBytes;
  using normd::kLargeBlockAlignment;
  for (;;) {
    // aligned_alloc's size must be a multiple of its alignment; a size within one alignment
    // of the largest would round to zero, and no allocator can give it anyway.
    void* p = nullptr;
    if (n < kAlignFromBytes) {
      p = std::malloc(n == 0 ? 1 : n);
    } else if (n >= normd::kHugePageAdviceBytes) {
      // On a huge page (above); the mapping's unused head is address space only.
      if (posix_memalign(&p, normd::kHugePageBytes, n) != 0) p = nullptr;
    } else if (n <= SIZE_MAX - kLargeBlockAlignment) {
      p = std::aligned_alloc(kLargeBlockAlignment,
                             (n + kLargeBlockAlignment - 1) & ~(kLargeBlockAlignment - 1));
    }
    if (p != nullptr) {
      if (n >= normd::kHugePageAdviceBytes) AdviseHugePages(p, n);
      return p;
    }
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* AllocateNoThrow(std::size_t n) noexcept {
  try {
    return Allocate(n);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

void* operator new(std::size_t n) { return Allocate(n); }
void* operator new[](std::size_t n) { return Allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return AllocateNoThrow(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return AllocateNoThrow(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
