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
// kWarpRowMaxCols columns a warp each, eight to a unit, with *max_warp_cols raised to the
// longest such row; longer rows a block each, with *max_block_cols raised to the longest.
// The two maxima size the launch's shared memory.
inline void PlanRowItems(int32_t segment, int64_t rows, int64_t cols, std::vector<RowItem>* items,
                         int64_t* max_block_cols, int64_t* max_warp_cols) {
  if (rows == 0 || cols == 0) return;
  if (cols <= kWarpRowMaxCols) {
    *max_warp_cols = std::max(*max_warp_cols, cols);
    for (int64_t r = 0; r < rows; r += 8) {
      items->push_back({segment, 1, r, static_cast<int32_t>(std::min<int64_t>(8, rows - r))});
    }
  } else {
    *max_block_cols = std::max(*max_block_cols, cols);
    for (int64_t r = 0; r < rows; ++r) items->push_back({segment, 0, r, 1});
  }
}

// Launches the row kernel over `items` (device array) of `segments` (device array), one
// launch; max_block_cols and max_warp_cols as PlanRowItems left them. Block rows longer
// than shared memory holds stage their first part and read the rest from global memory.
cudaError_t LaunchRowNorm(const RowSegment* segments, const RowItem* items, int num_items,
                          int64_t max_block_cols, int64_t max_warp_cols, cudaStream_t stream);

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
