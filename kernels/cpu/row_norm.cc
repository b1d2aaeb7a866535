// CpuBackend::RowNorm: prepares the per-call constants and splits the rows across the
// pool; the per-row work is the SIMD kernel in row_norm_simd.cc.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "kernels/cpu/aligned_scratch.h"
#include "kernels/cpu/bf16_nan.h"
#include "kernels/cpu/row_norm_simd.h"
#include "kernels/cpu/row_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "normd/kernels/cpu_backend.h"

namespace normd::kernels {
namespace {

// The parameter as fp32 (plus `offset`): the caller's own array when it already is one,
// else widened into `scratch` (a small call would otherwise spend as long widening its
// weights as normalizing). For a bf16 output, NaNs that may have nonzero low bits (fp32
// values, or an offset's) are given zero ones in `scratch` (bf16_nan.h): one scan of the
// parameter, and a copy only where it holds a NaN; none where the target's bf16 rounding
// keeps every NaN exact (AVX512_BF16), where the scan was 15% of a 1x4096 bf16 call.
const float* F32Param(const ConstTensor& t, int64_t n, float offset, bool bf16_out,
                      cpu::AlignedScratch* scratch) {
  if (!t.present()) return nullptr;
  const float* p = static_cast<const float*>(t.data);
  float* out = nullptr;
  if (t.dtype != DType::kF32 || offset != 0.0f) {
    out = scratch->Reserve(static_cast<size_t>(n + cpu::kRowPad));
    cpu::WidenToF32(t.dtype, t.data, n, offset, out);
    p = out;
  }
  if (!bf16_out || (t.dtype == DType::kBF16 && !std::isnan(offset)) || cpu::BF16StoresKeepNaNs() ||
      !cpu::AnyNaN(p, n)) {
    return p;
  }
  if (out == nullptr) {
    out = scratch->Reserve(static_cast<size_t>(n + cpu::kRowPad));
    std::fill(out + n, out + n + cpu::kRowPad, 0.0f);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = cpu::BF16SafeNaN(p[i]);
  return out;
}

}  // namespace

absl::Status CpuBackend::RowNorm(const RowNormArgs& a) { return RowNorm(a, threads()); }

absl::Status CpuBackend::RowNorm(const RowNormArgs& a, int max_threads) {
  return RowNormBatch(absl::MakeConstSpan(&a, 1), max_threads);
}

absl::Status CpuBackend::RowNormBatch(absl::Span<const RowNormArgs> segments) {
  // No more threads than its largest segment would get alone. A batch merges requests
  // that would each have run on one thread; splitting their concatenated rows over the
  // pool only adds the workers' wake-ups and spinning on a server whose other cores are
  // busy with other calls (batching on cost 6-14% throughput against off on the 2-core VM
  // until this; BENCHMARKS.md, "Serving core").
  int max_threads = 1;
  for (const RowNormArgs& a : segments) {
    max_threads = std::max(max_threads,
                           ThreadsFor(JobBytes(a.rows * a.cols, a.x.dtype, a.y.dtype), threads()));
  }
  return RowNormBatch(segments, max_threads);
}

absl::Status CpuBackend::RowNormBatch(absl::Span<const RowNormArgs> segments, int max_threads) {
  // Per segment: its fp32 parameters and where its rows start in the concatenation.
  struct Segment {
    const RowNormArgs* args;
    cpu::RowParams params;
    int64_t first_row;
  };
  // Inline for the usual few segments: a 1x4096 call takes well under a microsecond, and
  // a heap allocation and free were a visible share of it.
  absl::InlinedVector<Segment, 8> segs;
  segs.reserve(segments.size());
  // Widened parameters, kept by this thread for its next call: two arrays per segment.
  // The calling thread waits in ParallelFor, so nothing else uses them meanwhile.
  thread_local std::vector<cpu::AlignedScratch> scratch;
  if (scratch.size() < 2 * segments.size()) scratch.resize(2 * segments.size());
  int64_t rows = 0, elements = 0, out_bytes = 0;
  DType in = DType::kF32, out = DType::kF32;
  for (const RowNormArgs& a : segments) out_bytes += a.rows * a.cols * ElementSize(a.y.dtype);
  // Store kind never changes values, so a segment's result does not depend on its batch;
  // nor does where its parameters are read from.
  const bool stream = out_bytes > options_.stream_bytes;
  for (const RowNormArgs& a : segments) {
    if (a.rows == 0 || a.cols == 0) continue;
    // (offset + weight) is formed in fp32, as docs/semantics.md defines it.
    const float offset = a.kind == RowNormKind::kRms ? static_cast<float>(a.weight_offset) : 0.0f;
    Segment& s = segs.emplace_back();
    s.args = &a;
    s.params.stream = stream;
    if (cpu::ParamsInPlace(a, offset, stream)) {
      // f16/bf16 widened exactly in registers (a bf16 NaN keeps zero low bits).
      s.params.weight = a.weight.present() ? a.weight.data : nullptr;
      s.params.bias = a.bias.present() ? a.bias.data : nullptr;
      s.params.dtype = a.x.dtype;
      s.params.offset = offset;
    } else {
      const size_t k = 2 * (segs.size() - 1);
      const bool bf16 = a.x.dtype == DType::kBF16 || a.y.dtype == DType::kBF16;
      s.params.weight = F32Param(a.weight, a.cols, offset, bf16, &scratch[k]);
      s.params.bias = F32Param(a.bias, a.cols, 0.0f, bf16, &scratch[k + 1]);
    }
    s.first_row = rows;
    rows += a.rows;
    elements += a.rows * a.cols;
    in = a.x.dtype;
    out = a.y.dtype;
  }
  if (segs.empty()) return absl::OkStatus();
  // Mixed dtypes count as their last segment's: only the thread count depends on it.
  const int64_t job_bytes = JobBytes(elements, in, out);
  max_threads = ThreadsFor(job_bytes, max_threads);
  pool_->ParallelFor(rows, max_threads, job_bytes, [&](int64_t begin, int64_t end) {
    // First segment holding row `begin` of the concatenation.
    auto it = std::upper_bound(segs.begin(), segs.end(), begin,
                               [](int64_t r, const Segment& s) { return r < s.first_row; });
    for (--it; it != segs.end() && it->first_row < end; ++it) {
      const int64_t b = std::max(begin, it->first_row) - it->first_row;
      const int64_t e = std::min(end, it->first_row + it->args->rows) - it->first_row;
      cpu::RowNormRows(*it->args, it->params, b, e);
    }
  });
  return absl::OkStatus();
}

}  // namespace normd::kernels
