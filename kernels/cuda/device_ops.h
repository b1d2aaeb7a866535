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
  const float* weight;  // fp32 with the offset added, or null
  const float* bias;    // fp32 or null
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
// kWarpRowMaxCols columns a warp each, eight to a unit; longer rows a block each, with
// *max_block_cols raised to the longest such row.
inline void PlanRowItems(int32_t segment, int64_t rows, int64_t cols, std::vector<RowItem>* items,
                         int64_t* max_block_cols) {
  if (rows == 0 || cols == 0) return;
  if (cols <= kWarpRowMaxCols) {
    for (int64_t r = 0; r < rows; r += 8) {
      items->push_back({segment, 1, r, static_cast<int32_t>(std::min<int64_t>(8, rows - r))});
    }
  } else {
    *max_block_cols = std::max(*max_block_cols, cols);
    for (int64_t r = 0; r < rows; ++r) items->push_back({segment, 0, r, 1});
  }
}

// Launches the row kernel over `items` (device array) of `segments` (device array).
// smem_cols: the longest row staged in shared memory (block rows); rows longer than what
// shared memory holds are read twice from global memory.
cudaError_t LaunchRowNorm(const RowSegment* segments, const RowItem* items, int num_items,
                          int64_t max_block_cols, cudaStream_t stream);

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

// y = (x - mean[k]) / sqrt(var[k] + eps) * w[c] + b[c].
cudaError_t LaunchChannelApply(const ChannelArgs& a, const double* mean, const double* var,
                               cudaStream_t stream);

// Widens `n` elements of `dtype` at src to fp32 at dst, adding `offset`.
cudaError_t LaunchWiden(int32_t dtype, const void* src, int64_t n, float offset, float* dst,
                        cudaStream_t stream);
// Narrows n doubles to `dtype` (round to nearest even).
cudaError_t LaunchNarrow(const double* src, int64_t n, int32_t dtype, void* dst,
                         cudaStream_t stream);

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_DEVICE_OPS_H_
