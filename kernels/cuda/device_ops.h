// Device-side argument tables of the CUDA kernels, their host launchers, and how a call is
// cut into launch units (PlanRowItems, StatsSplits). Plain structs (no Abseil, no
// protobuf) shared by the .cu files, the backend's host code and the CUDA benchmark
// (kernels/bench/cuda_bench.cc), which launches the kernels on device-resident tensors as
// the backend does; every pointer in them is device memory.
//
// Thread safety: launchers only enqueue work on the given stream; the planners are pure.
#ifndef NORMD_KERNELS_CUDA_DEVICE_OPS_H_
#define NORMD_KERNELS_CUDA_DEVICE_OPS_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace normd::kernels::cuda {

// Element type codes, as kernels::DType's values.
enum DevDType : int32_t { kDevF32 = 0, kDevF16 = 1, kDevBF16 = 2 };

// One RowNorm call of a ragged batch.
struct RowSegment {
  int32_t kind;  // RowNormKind: 0 layer, 1 rms, 2 l2
  int32_t x_dtype, y_dtype;
  int32_t eps_inside;  // 1: 1/sqrt(v + eps); 0: 1/(sqrt(v) + eps)
  int32_t cast_before_weight;
  int32_t residual;  // ResidualPlacement: 0 none, 1 add then norm, 2 norm then add
  int64_t rows, cols, partial_m;
  double eps;
  float alpha;
  const void* x;
  const void* skip;
  const void* weight;  // of w_dtype, or null
  const void* bias;    // of b_dtype, or null
  int32_t w_dtype, b_dtype;
  float w_offset;  // added to the weight in fp32 (RMSNorm's offset: Gemma's 1 + w)
  void* y;
  void* h;  // or null
};

// A unit of a row launch: `count` rows of segment `segment` from `first_row`, processed
// by one warp per row (warp_rows) or by the whole block.
struct RowItem {
  int32_t segment;
  int32_t warp_rows;  // 1: a warp per row, up to 8 rows; 0: one row for the whole block
  int64_t first_row;
  int32_t count;
};

inline constexpr int kRowBlockThreads = 256;
inline constexpr int kWarpRowMaxCols = 2048;  // above: a block per row

// Appends the launch units of segment `segment` (rows x cols) to `items`: rows up to
// kWarpRowMaxCols columns a warp each, eight to a unit; longer rows a block each.
// GroupRowItems then cuts the items into launches.
inline void PlanRowItems(int32_t segment, int64_t rows, int64_t cols, std::vector<RowItem>* items) {
  if (rows == 0 || cols == 0) return;
  if (cols <= kWarpRowMaxCols) {
    for (int64_t r = 0; r < rows; r += 8) {
      items->push_back({segment, 1, r, static_cast<int32_t>(std::min<int64_t>(8, rows - r))});
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) items->push_back({segment, 0, r, 1});
  }
}

// Vectors of x (16 bytes each) a thread holds when the rows of segment `s`, planned as warp
// rows or block rows, can be kept in registers (row_norm_regs.cu): 1, 2, 4 or 8 (8 for f32
// rows alone: 32 values a thread), the fewest that hold a row; 0 where they cannot: a row
// not a whole number of vectors, a tensor not 16-byte aligned, or a row too long.
inline int32_t RowRegisters(const RowSegment& s, bool warp_rows) {
  const int64_t vec = s.x_dtype == kDevF32 ? 4 : 8;
  if (s.cols % vec != 0) return 0;
  for (const void* p : {s.x, s.skip, s.weight, s.bias, static_cast<const void*>(s.y),
                        static_cast<const void*>(s.h)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 0;
  }
  const int64_t width = warp_rows ? 32 : kRowBlockThreads;
  const int64_t per_thread = (s.cols / vec + width - 1) / width;
  const int32_t most = vec == 4 ? 8 : 4;
  for (int32_t k = 1; k <= most; k *= 2) {
    if (per_thread <= k) return k;
  }
  return 0;
}

// One launch of the row kernels: items [first, first + count) of the item table, all of
// one kind (warp rows or block rows), of segments of one (x, y) dtype pair, and held in
// `vectors` registers a thread (RowRegisters; 0: staged through shared memory), so that
// the kernel is compiled for exactly that: a kernel holding every kind and dtype pair
// needs registers for the worst of them, spills, and calls its dtype paths instead of
// inlining them. max_cols, the longest row among them, sizes a staging launch's shared
// memory.
struct RowLaunch {
  int32_t warp_rows, x_dtype, y_dtype, vectors;
  int32_t first, count;
  int64_t max_cols;
};

// Orders `items` (as PlanRowItems appended them for the segments of the host table `table`,
// whose pointers are the device addresses the kernels will read) so that the items of each
// launch are contiguous, keeping their order within a launch, and returns the launches: one
// per (vectors, kind, x dtype, y dtype) present, in that key's order. A segment's items
// share a key, computed once per run of them (this runs on every call: 4096 rows are 4096
// items); items already in order are not sorted.
inline std::vector<RowLaunch> GroupRowItems(const RowSegment* table, std::vector<RowItem>* items) {
  const size_t n = items->size();
  std::vector<int32_t> keys(n);
  for (size_t i = 0; i < n; ++i) {
    const RowItem& it = (*items)[i];
    if (i > 0 && it.segment == (*items)[i - 1].segment &&
        it.warp_rows == (*items)[i - 1].warp_rows) {
      keys[i] = keys[i - 1];
      continue;
    }
    const RowSegment& s = table[it.segment];
    keys[i] =
        ((RowRegisters(s, it.warp_rows != 0) * 2 + it.warp_rows) * 3 + s.x_dtype) * 3 + s.y_dtype;
  }
  if (!std::is_sorted(keys.begin(), keys.end())) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return keys[a] < keys[b]; });
    std::vector<RowItem> sorted(n);
    std::vector<int32_t> sorted_keys(n);
    for (size_t i = 0; i < n; ++i) {
      sorted[i] = (*items)[order[i]];
      sorted_keys[i] = keys[order[i]];
    }
    *items = std::move(sorted);
    keys = std::move(sorted_keys);
  }
  std::vector<RowLaunch> launches;
  for (size_t i = 0; i < n; ++i) {
    const RowItem& it = (*items)[i];
    const RowSegment& s = table[it.segment];
    if (i == 0 || keys[i - 1] != keys[i]) {
      launches.push_back({it.warp_rows, s.x_dtype, s.y_dtype, RowRegisters(s, it.warp_rows != 0),
                          static_cast<int32_t>(i), 0, 0});
    }
    ++launches.back().count;
    launches.back().max_cols = std::max(launches.back().max_cols, s.cols);
  }
  return launches;
}

// Launches the row kernel over one launch's items of `items` (device array) of `segments`
// (device array). Staged block rows longer than shared memory holds stage their first part
// and read the rest from global memory.
cudaError_t LaunchRowNorm(const RowSegment* segments, const RowItem* items, const RowLaunch& launch,
                          cudaStream_t stream);
// LaunchRowNorm's launches with vectors > 0 (row_norm_regs.cu).
cudaError_t LaunchRegisterRows(const RowSegment* segments, const RowItem* items,
                               const RowLaunch& launch, cudaStream_t stream);

// Per-channel (BatchNorm) or per-(sample, group) statistics and the affine apply.
struct ChannelArgs {
  int64_t n, c, s;
  int64_t groups;         // BatchNorm: 0 (statistics per channel over N x S)
  int32_t channels_last;  // layout
  int32_t x_dtype, y_dtype;
  const void* x;
  void* y;
  const float* weight;  // fp32 or null
  const float* bias;
  double eps;
};

// Partial (count, mean, M2) of `splits` chunks per statistic set, then their Chan merge
// into mean[k], var[k] (biased), in double.
cudaError_t LaunchChannelStats(const ChannelArgs& a, int splits, double* partials, double* mean,
                               double* var, cudaStream_t stream);
// How many chunks each of `sets` statistic sets of `set_size` elements is split into, so
// that the statistics launch has about two blocks per SM (`sms`), at least 4096 elements a
// chunk, at most 1024 chunks.
inline int StatsSplits(int64_t sets, int64_t set_size, int sms) {
  int64_t splits = std::max<int64_t>(1, (2 * sms + sets - 1) / sets);
  splits = std::min(splits, std::max<int64_t>(1, set_size / 4096));
  return static_cast<int>(std::min<int64_t>(splits, 1024));
}

// How many chunks each statistic set of `a` is split into (StatsSplits; for channels-last
// BatchNorm, whose blocks each read up to 256 channels of a range of rows, the tiles of 256
// channels count as the sets).
inline int ChannelStatsSplits(const ChannelArgs& a, int sms) {
  if (a.groups == 0 && a.channels_last) {
    const int64_t tiles = (a.c + 255) / 256;
    return StatsSplits(tiles, a.n * a.s * std::min<int64_t>(a.c, 256), sms);
  }
  return a.groups == 0 ? StatsSplits(a.c, a.n * a.s, sms)
                       : StatsSplits(a.n * a.groups, (a.c / a.groups) * a.s, sms);
}

// The apply pass's per-(sample, channel) parameters: C for BatchNorm, N x C for GroupNorm.
inline int64_t ChannelParamCount(const ChannelArgs& a) { return a.groups == 0 ? a.c : a.n * a.c; }

// y = (x - mean[k]) / sqrt(var[k] + eps) * w[c] + b[c], through `params` (device scratch of
// ChannelParamCount(a) entries).
cudaError_t LaunchChannelApply(const ChannelArgs& a, const double* mean, const double* var,
                               float4* params, cudaStream_t stream);

// Widens `n` elements of `dtype` at src to fp32 at dst, adding `offset`.
cudaError_t LaunchWiden(int32_t dtype, const void* src, int64_t n, float offset, float* dst,
                        cudaStream_t stream);

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_DEVICE_OPS_H_
