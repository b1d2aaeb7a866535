// normd's replacement of the global operator new and delete: a block of kAlignFromBytes or
// more starts on a 64-byte boundary (a cache line, and AVX-512's vector); smaller ones are
// malloc's as before. Linked into the normd executable only (and its own test), so every
// library in the process, protobuf's parse included, allocates through it.
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
// Thread safety: as malloc's.
#include "server/aligned_new.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

void* Allocate(std::size_t n) {
  using normd::server::kAlignFromBytes;
  using normd::server::kLargeBlockAlignment;
  for (;;) {
    // aligned_alloc's size must be a multiple of its alignment; a size within one alignment
    // of the largest would round to zero, and no allocator can give it anyway.
    void* p = nullptr;
    if (n < kAlignFromBytes) {
      p = std::malloc(n == 0 ? 1 : n);
    } else if (n <= SIZE_MAX - kLargeBlockAlignment) {
      p = std::aligned_alloc(kLargeBlockAlignment,
                             (n + kLargeBlockAlignment - 1) & ~(kLargeBlockAlignment - 1));
    }
    if (p != nullptr) return p;
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
