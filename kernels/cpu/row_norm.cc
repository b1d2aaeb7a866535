// CpuBackend::RowNorm: prepares the per-call constants and splits the rows across the
// pool; the per-row work is the SIMD kernel in row_norm_simd.cc.
#include <algorithm>

#include "hwy/aligned_allocator.h"
#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/thread_pool.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels {
namespace {

// The parameter as fp32 (plus `offset`), zero-padded to whole vectors.
hwy::AlignedFreeUniquePtr<float[]> PaddedF32(const ConstTensor& t, int64_t n, float offset) {
  if (!t.present()) return nullptr;
  auto out = hwy::AllocateAligned<float>(static_cast<size_t>(n + cpu::kRowPad));
  std::fill(out.get() + n, out.get() + n + cpu::kRowPad, 0.0f);
  cpu::WidenToF32(t.dtype, t.data, n, out.get());
  if (offset != 0.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] += offset;
  }
  return out;
}

}  // namespace

absl::Status CpuBackend::RowNorm(const RowNormArgs& a) { return RowNorm(a, threads()); }

absl::Status CpuBackend::RowNorm(const RowNormArgs& a, int max_threads) {
  if (a.rows == 0 || a.cols == 0) return absl::OkStatus();
  max_threads = ThreadsFor(a.rows * a.cols, a.x.dtype, a.y.dtype, max_threads);
  // (offset + weight) is formed in fp32, as SEMANTICS.md defines it.
  const float offset = a.kind == RowNormKind::kRms ? static_cast<float>(a.weight_offset) : 0.0f;
  const auto weight = PaddedF32(a.weight, a.cols, offset);
  const auto bias = PaddedF32(a.bias, a.cols, 0.0f);
  cpu::RowParams p;
  p.weight = weight.get();
  p.bias = bias.get();
  p.stream = a.rows * a.cols * ElementSize(a.y.dtype) > options_.stream_bytes;
  pool_->ParallelFor(a.rows, max_threads,
                     [&](int64_t begin, int64_t end) { cpu::RowNormRows(a, p, begin, end); });
  return absl::OkStatus();
}

}  // namespace normd::kernels
