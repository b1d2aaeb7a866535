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
#include <numeric>
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

// Threads of a block row held in registers (row_norm_regs.cu): for f16/bf16 segments of
// at least kHalfBlockRows rows, half a block where that many hold the row in four vectors
// a thread or fewer, else a block. A block row's time is mostly the latency of its loads
// and of two block-wide sums, so with rows enough for several waves, twice the rows an SM,
// each thread with twice the loads in flight, move more bytes an SM (H200: 4096x4096
// f16/bf16 row ops 1.09-1.27x). Calls of few rows are bound by the launch, and ran no faster
// (8 and 64 rows of 4096 on an H200: mixed, some slower); f32 rows held in eight vectors a
// thread by half a block were 5-10% slower at 4096x4096.
inline constexpr int64_t kHalfBlockRows = 1024;
inline int32_t RegisterBlockThreads(const RowSegment& s) {
  if (s.x_dtype == kDevF32 || s.rows < kHalfBlockRows) return kRowBlockThreads;
  const int64_t half = kRowBlockThreads / 2;
  return (s.cols / 8 + half - 1) / half <= 4 ? half : kRowBlockThreads;
}

// The most blocks of a thread block cluster that share one block row (row_norm_cluster.cu):
// eight, the portable cluster size, hold rows of 65536 values in registers.
inline constexpr int32_t kMaxRowCluster = 8;
// Blocks (of kRowBlockThreads) of a cluster that hold one block row of segment `s` in
// registers: 1 where one block holds it (at most 8 vectors a thread for f32 rows, 4 for
// f16/bf16: 32 values), else the fewest of up to `max_cluster` blocks that do; 1 also where
// none do (the row stays with the staging kernel). RowRegisters says whether the row may be
// held at all.
inline int32_t RowClusterBlocks(const RowSegment& s, int32_t max_cluster) {
  const int64_t vec = s.x_dtype == kDevF32 ? 4 : 8;
  const int64_t per_block = kRowBlockThreads * (vec == 4 ? 8 : 4);
  const int64_t blocks = (s.cols / vec + per_block - 1) / per_block;
  return blocks >= 2 && blocks <= max_cluster ? static_cast<int32_t>(blocks) : 1;
}
// Vectors of x (16 bytes each) a thread holds when the rows of segment `s`, planned as warp
// rows or block rows (of RegisterBlockThreads threads, or of clusters of RowClusterBlocks
// blocks of up to `max_cluster`: MaxRowClusterBlocks on the device, 1 where clusters cannot
// be launched), can be kept in registers (row_norm_regs.cu, row_norm_cluster.cu): 1, 2, 4
// or 8 (8 for f32 rows alone: 32 values a thread), the fewest that hold a row; 0 where they
// cannot: a row not a whole number of vectors, a tensor not 16-byte aligned, or a row too
// long.
inline int32_t RowRegisters(const RowSegment& s, bool warp_rows, int32_t max_cluster = 1) {
  const int64_t vec = s.x_dtype == kDevF32 ? 4 : 8;
  if (s.cols % vec != 0) return 0;
  for (const void* p : {s.x, s.skip, s.weight, s.bias, static_cast<const void*>(s.y),
                        static_cast<const void*>(s.h)}) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 0;
  }
  const int64_t width =
      warp_rows ? 32 : int64_t{RegisterBlockThreads(s)} * RowClusterBlocks(s, max_cluster);
  const int64_t per_thread = (s.cols / vec + width - 1) / width;
  const int32_t most = vec == 4 ? 8 : 4;
  for (int32_t k = 1; k <= most; k *= 2) {
    if (per_thread <= k) return k;
  }
  return 0;
}
// Blocks of a cluster a launch of block rows of `s` takes: RowClusterBlocks where the rows
// are held in registers, else 1 (warp rows, staged rows, one-block rows).
inline int32_t RowLaunchCluster(const RowSegment& s, bool warp_rows, int32_t max_cluster) {
  if (warp_rows || RowRegisters(s, false, max_cluster) == 0) return 1;
  return RowClusterBlocks(s, max_cluster);
}
// A launch's threads a block: half a block for block rows in registers where
// RegisterBlockThreads says so, else kRowBlockThreads (warp rows: eight a block).
inline int32_t RowLaunchThreads(const RowSegment& s, bool warp_rows, int32_t max_cluster = 1) {
  return !warp_rows && RowRegisters(s, false, max_cluster) > 0 ? RegisterBlockThreads(s)
                                                               : kRowBlockThreads;
}
// The most blocks a row cluster may have on the current device: kMaxRowCluster where the
// device launches clusters and the kernels were built for it (sm_90 or later), else 1.
// Cached per device; 1 where the device cannot be asked.
int32_t MaxRowClusterBlocks();
// One launch of the row kernels: items [first, first + count) of the item table, all of
// one kind (warp rows or block rows), of segments of one (x, y) dtype pair, and held in
// `vectors` registers a thread (RowRegisters; 0: staged through shared memory), so that
// the kernel is compiled for exactly that: a kernel holding every kind and dtype pair
// needs registers for the worst of them, spills, and calls its dtype paths instead of
// inlining them. max_cols, the longest row among them, sizes a staging launch's shared
// memory. cluster: blocks of a thread block cluster a block row takes (RowLaunchCluster; 1:
// a block a row, or warp rows).
struct RowLaunch {
  int32_t warp_rows, x_dtype, y_dtype, vectors;
  int32_t first, count;
  int64_t max_cols;
  int32_t threads;  // a block (RowLaunchThreads)
  int32_t cluster;
};

// Orders `items` (as PlanRowItems appended them for the segments of the host table `table`,
// whose pointers are the device addresses the kernels will read) so that the items of each
// launch are contiguous, keeping their order within a launch, and returns the launches: one
// per (cluster, vectors, threads, kind, x dtype, y dtype) present, in that key's order, with
// clusters of up to `max_cluster` blocks (MaxRowClusterBlocks). A segment's items share a
// key, computed once per run of them (this runs on every call: 4096 rows are 4096 items);
// items already in order are not sorted.
inline std::vector<RowLaunch> GroupRowItems(const RowSegment* table, std::vector<RowItem>* items,
                                            int32_t max_cluster) {
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
    const bool warp = it.warp_rows != 0;
    const int32_t half = RowLaunchThreads(s, warp, max_cluster) < kRowBlockThreads;
    const int32_t vectors = RowRegisters(s, warp, max_cluster);
    const int32_t cluster = RowLaunchCluster(s, warp, max_cluster);
    keys[i] =
        ((((cluster * 9 + vectors) * 2 + half) * 2 + it.warp_rows) * 3 + s.x_dtype) * 3 + s.y_dtype;
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
      const bool warp = it.warp_rows != 0;
      launches.push_back({it.warp_rows, s.x_dtype, s.y_dtype, RowRegisters(s, warp, max_cluster),
                          static_cast<int32_t>(i), 0, 0, RowLaunchThreads(s, warp, max_cluster),
                          RowLaunchCluster(s, warp, max_cluster)});
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
// LaunchRowNorm's launches with vectors > 0 and cluster 1 (row_norm_regs.cu).
cudaError_t LaunchRegisterRows(const RowSegment* segments, const RowItem* items,
                               const RowLaunch& launch, cudaStream_t stream);
// LaunchRowNorm's launches with cluster > 1 (row_norm_cluster.cu).
cudaError_t LaunchClusterRows(const RowSegment* segments, const RowItem* items,
                              const RowLaunch& launch, cudaStream_t stream);

// Per-channel (BatchNorm) or per-(sample, group) statistics and the affine apply.
struct ChannelArgs {
  int64_t n, c, s;
  int64_t groups;         // BatchNorm: 0 (statistics per channel over N x S)
  int32_t channels_last;  // layout (S == 1 reads as channels-last: the same memory)
  int32_t x_dtype, y_dtype;
  int32_t w_dtype, b_dtype;  // of weight and bias, as the caller gave them
  const void* x;
  void* y;
  const void* weight;  // of w_dtype, or null
  const void* bias;    // of b_dtype, or null
  double eps;
};

// How many chunks each of `sets` statistic sets of `set_size` elements is split into: as
// many as keep the statistics launch within one wave of three blocks an SM (`sms`; a
// second, partial wave would double the time of a launch whose blocks all take about as
// long), at least 4096 elements a chunk, at most 1024 chunks.
inline int StatsSplits(int64_t sets, int64_t set_size, int sms) {
  int64_t splits = std::max<int64_t>(1, 3 * static_cast<int64_t>(sms) / sets);
  splits = std::min(splits, std::max<int64_t>(1, set_size / 4096));
  return static_cast<int>(std::min<int64_t>(splits, 1024));
}

// The channels-last statistics kernel's plan: each block reads a tile of `width` channels
// of a range of rows, a thread `vec` neighbouring channels of every few rows (one 16-byte
// load where vec fills one), so that a warp's loads are contiguous. The width is a
// multiple of vec and, for GroupNorm, of a group's channels (a block sums whole groups); at
// most 256 x vec. vec 0: the layout or the shape does not allow it (the generic kernel
// reads the set's runs instead).
struct ChannelsLastPlan {
  int vec = 0;
  int64_t width = 0;
};
inline ChannelsLastPlan PlanChannelsLast(const ChannelArgs& a) {
  if (!a.channels_last || a.c <= 0) return {};
  if (a.groups != 0 && a.n > 65535) return {};    // grid dimensions: samples, tiles
  const int full = a.x_dtype == kDevF32 ? 4 : 8;  // elements in 16 bytes
  const int64_t cpg = a.groups == 0 ? 1 : a.c / a.groups;
  for (int vec : {full, 1}) {
    if (a.c % vec != 0) continue;
    const int64_t most = int64_t{256} * vec;
    if (a.c <= most) return {vec, a.c};
    const int64_t unit = std::lcm<int64_t>(cpg, vec);
    if (unit <= most && (a.c + most - 1) / (most / unit * unit) <= 65535) {
      return {vec, most / unit * unit};
    }
  }
  return {};
}

// How many chunks each statistic set of `a` is split into (StatsSplits; on the
// channels-last plan the blocks' units are tiles of channels of a row range, per sample
// for GroupNorm).
inline int ChannelStatsSplits(const ChannelArgs& a, int sms) {
  if (const ChannelsLastPlan p = PlanChannelsLast(a); p.vec != 0) {
    const int64_t tiles = (a.c + p.width - 1) / p.width;
    const int64_t units = tiles * (a.groups == 0 ? 1 : a.n);
    const int64_t rows = a.groups == 0 ? a.n * a.s : a.s;
    return StatsSplits(units, rows * std::min(a.c, p.width), sms);
  }
  return a.groups == 0 ? StatsSplits(a.c, a.n * a.s, sms)
                       : StatsSplits(a.n * a.groups, (a.c / a.groups) * a.s, sms);
}

// The apply pass's per-(sample, channel) parameters: C for BatchNorm, N x C for GroupNorm.
inline int64_t ChannelParamCount(const ChannelArgs& a) { return a.groups == 0 ? a.c : a.n * a.c; }

// Division by a fixed divisor d (1 <= d <= 2^31) of a dividend below 2^31 as a multiply
// and a shift (the round-up method, as PyTorch's IntDivider): the apply pass finds a
// chunk's channel with it, where a 64-bit division costs dozens of instructions. `wide`
// (a divisor or a largest dividend beyond those) divides in 64 bits instead.
struct FastDiv {
  int64_t d = 1;
  uint32_t magic = 1, shift = 0;
  bool wide = false;
  FastDiv() = default;
  FastDiv(int64_t divisor, int64_t largest_dividend) : d(divisor) {
    wide = divisor > (int64_t{1} << 31) || largest_dividend >= (int64_t{1} << 31);
    if (wide) return;
    while (shift < 32 && (uint64_t{1} << shift) < static_cast<uint64_t>(divisor)) ++shift;
    const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - divisor)) / divisor + 1;
    magic = static_cast<uint32_t>(m);
  }
  __host__ __device__ int64_t Div(int64_t n) const {
    if (wide) return n / d;
    const uint32_t u = static_cast<uint32_t>(n);
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(u) * magic) >> 32);
    return static_cast<int64_t>((hi + u) >> shift);
  }
};

// Partial sums of `splits` chunks per statistic set, merged in a fixed order into mean[k]
// and var[k] (biased, in double), and from them the apply pass's fp32 parameters
// (ChannelParamCount(a) float4 entries at `params`): two launches.
cudaError_t LaunchChannelStats(const ChannelArgs& a, int splits, double* partials, double* mean,
                               double* var, float4* params, cudaStream_t stream);
// The apply pass's parameters from given statistics (inference BatchNorm's running ones).
cudaError_t LaunchChannelParams(const ChannelArgs& a, const double* mean, const double* var,
                                float4* params, cudaStream_t stream);
// y = ((x - shift) - dm) * scale + bias with each element's parameters: the normalization
// (x - mean) / sqrt(var + eps) * w + b.
cudaError_t LaunchChannelApply(const ChannelArgs& a, const float4* params, cudaStream_t stream);

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_DEVICE_OPS_H_
