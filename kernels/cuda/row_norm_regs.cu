// The row kernels for rows that fit in the registers of a warp or a block (RegisterRow,
// row_registers.cuh): every 16-byte vector of x read from global memory once and kept
// widened in registers through the statistics and the epilogue. The staging kernel
// (row_norm.cu) writes each value to shared memory and reads it back twice, with bounds
// and alignment checks per chunk; on an H100 it issued about twice the instructions its
// bytes allow (Nsight Compute: 51% issue slots busy, DRAM 24% busy, LayerNorm f16
// 4096x4096). Used where GroupRowItems finds the rows aligned and short enough
// (RowRegisters); longer aligned rows take the cluster kernel (row_norm_cluster.cu), the
// rest the staging kernel.
#include "kernels/cuda/row_registers.cuh"

namespace normd::kernels::cuda {
namespace {

// One item a block: eight rows a warp each, or one row for the whole block (of 128 or 256
// threads: RegisterBlockThreads). At least three blocks of 256 to an SM, as the staging
// kernel.
template <bool kWarpRows, int XT, int YT, int kV>
__global__ void __launch_bounds__(kRowBlockThreads, 3)
    RegisterRowKernel(const RowSegment* segments, const RowItem* items) {
  __shared__ double scratch[64];
  const RowItem item = items[blockIdx.x];
  const RowSegment& s = segments[item.segment];
  if constexpr (kWarpRows) {
    const int warp = threadIdx.x / 32;
    if (warp < item.count) {
      RegisterRow<WarpGroup, XT, YT, kV>(s, item.first_row + warp, threadIdx.x % 32, 32, scratch);
    }
  } else {
    RegisterRow<BlockGroup, XT, YT, kV>(s, item.first_row, threadIdx.x, blockDim.x, scratch);
  }
}

using Kernel = void (*)(const RowSegment*, const RowItem*);

template <bool kWarpRows, int XT, int YT>
Kernel ForVectors(int kv) {
  // f16/bf16 rows hold at most four vectors (32 values) a thread, f32 rows eight.
  if constexpr (XT == kDevF32) {
    if (kv == 8) return RegisterRowKernel<kWarpRows, XT, YT, 8>;
  }
  return kv == 1   ? RegisterRowKernel<kWarpRows, XT, YT, 1>
         : kv == 2 ? RegisterRowKernel<kWarpRows, XT, YT, 2>
         : kv == 4 ? RegisterRowKernel<kWarpRows, XT, YT, 4>
                   : nullptr;
}
template <bool kWarpRows, int XT>
Kernel ForY(int32_t y, int kv) {
  return y == kDevF32   ? ForVectors<kWarpRows, XT, kDevF32>(kv)
         : y == kDevF16 ? ForVectors<kWarpRows, XT, kDevF16>(kv)
                        : ForVectors<kWarpRows, XT, kDevBF16>(kv);
}
template <bool kWarpRows>
Kernel ForX(int32_t x, int32_t y, int kv) {
  return x == kDevF32   ? ForY<kWarpRows, kDevF32>(y, kv)
         : x == kDevF16 ? ForY<kWarpRows, kDevF16>(y, kv)
                        : ForY<kWarpRows, kDevBF16>(y, kv);
}

}  // namespace

cudaError_t LaunchRegisterRows(const RowSegment* segments, const RowItem* items,
                               const RowLaunch& launch, cudaStream_t stream) {
  const Kernel kernel = launch.warp_rows
                            ? ForX<true>(launch.x_dtype, launch.y_dtype, launch.vectors)
                            : ForX<false>(launch.x_dtype, launch.y_dtype, launch.vectors);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  kernel<<<launch.count, launch.threads, 0, stream>>>(segments, items + launch.first);
  return cudaGetLastError();
}

}  // namespace normd::kernels::cuda
