// The row kernel for rows too long for one block's registers: the blocks of a thread block
// cluster (Hopper and later) hold one row between them, each thread up to 32 values
// (RegisterRow, row_registers.cuh), and add their sums through distributed shared memory.
// The staging kernel (row_norm.cu) stages such a row in up to 227 KB of shared memory, one
// block an SM with eight warps of loads in flight, and reads what does not fit twice: on an
// H200, 1024x65536 row ops ran at 0.21-0.29 of a device copy, below PyTorch's two passes
// for the LayerNorm family. Held in registers by a cluster of up to kMaxRowCluster blocks
// of 256, a row is read once, with three blocks an SM. Used where GroupRowItems finds the
// rows aligned, a whole number of vectors and within a cluster's registers
// (RowClusterBlocks), on a device and build that launch clusters (MaxRowClusterBlocks).
#include <cooperative_groups.h>

#include <atomic>

#include "kernels/cuda/row_registers.cuh"

namespace normd::kernels::cuda {
namespace {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
namespace cg = cooperative_groups;

// The blocks of a cluster sharing a row (the block must reach Sum and Sum2 together, as
// BlockGroup's): each block's sum goes to its own slot in shared memory (after the 64
// doubles of BlockSum2's scratch: Sum's, then Sum2's), and every block adds the cluster's
// slots in rank order, so that each gets the same sum, bit for bit. A block's slots must
// outlive the other blocks' reads of them: after the row's last sum (`more` false) each
// thread arrives on the cluster barrier once it has read the slots, and ClusterRowKernel
// waits for that phase only as it leaves. A full sync there held each block until the
// cluster's slowest block had stored its row (on an H200, RMSNorm f32 at 1024x65536 ran at
// 0.53 of the copy so, 0.55 with the arrival; fused add+RMSNorm 0.68, 0.77). An arrival
// after LayerNorm's first sum as well, waited for before the second, cost it 1-3%: its
// second sum's sync already orders the first's reads.
struct ClusterGroup {
  __device__ static double2 Reduce(double2 v, double* scratch, int call, bool last) {
    v = BlockSum2(v, scratch);
    double2* slot = reinterpret_cast<double2*>(scratch + 64) + call;
    if (threadIdx.x == 0) *slot = v;
    const cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every block's slot written, and visible to the cluster
    double2 t = make_double2(0.0, 0.0);
    const unsigned blocks = cluster.num_blocks();
    for (unsigned r = 0; r < blocks; ++r) {
      const double2 p = *cluster.map_shared_rank(slot, static_cast<int>(r));
      t.x += p.x;
      t.y += p.y;
    }
    if (last) (void)cluster.barrier_arrive();  // this thread is done with the slots
    return t;
  }
  __device__ static double Sum(double v, double* scratch, bool more = false) {
    return Reduce(make_double2(v, 0.0), scratch, 0, !more).x;
  }
  __device__ static double2 Sum2(double2 v, double* scratch) { return Reduce(v, scratch, 1, true); }
};
#endif

// One item a cluster: its row, shared by the cluster's blocks (of 256 threads) in rank
// order. kV: f16/bf16 rows four vectors a thread, f32 rows eight (RowClusterBlocks picks
// the fewest blocks, which leaves each thread more than half that).
template <int XT, int YT, int kV>
__global__ void __launch_bounds__(kRowBlockThreads, 3)
    ClusterRowKernel(const RowSegment* segments, const RowItem* items) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  __shared__ __align__(16) double scratch[68];
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned blocks = cluster.num_blocks();
  const RowItem item = items[blockIdx.x / blocks];
  const RowSegment& s = segments[item.segment];
  const int width = static_cast<int>(blocks * blockDim.x);
  RegisterRow<ClusterGroup, XT, YT, kV>(
      s, item.first_row, static_cast<int>(cluster.block_rank() * blockDim.x + threadIdx.x), width,
      scratch);
  cluster.barrier_wait();  // no block leaves while another may still read its slots
#else
  __trap();  // built without sm_90: MaxRowClusterBlocks never plans this kernel
#endif
}

using Kernel = void (*)(const RowSegment*, const RowItem*);

template <int XT>
Kernel ForY(int32_t y) {
  constexpr int kV = XT == kDevF32 ? 8 : 4;
  return y == kDevF32   ? ClusterRowKernel<XT, kDevF32, kV>
         : y == kDevF16 ? ClusterRowKernel<XT, kDevF16, kV>
                        : ClusterRowKernel<XT, kDevBF16, kV>;
}
Kernel ForX(int32_t x, int32_t y) {
  return x == kDevF32 ? ForY<kDevF32>(y) : x == kDevF16 ? ForY<kDevF16>(y) : ForY<kDevBF16>(y);
}

constexpr int kMaxDevices = 64;

}  // namespace

int32_t MaxRowClusterBlocks() {
  static std::atomic<int32_t> of[kMaxDevices] = {};  // 0: not yet asked
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && of[device].load() != 0) return of[device].load();
  int32_t most = 1;
  int cluster_launch = 0;
  cudaFuncAttributes attributes{};
  // A device that launches clusters, and a build whose code for it is sm_90 or later (code
  // built for sm_80 alone would run there without the cluster instructions).
  if (cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
      cluster_launch != 0 &&
      cudaFuncGetAttributes(&attributes, ForX(kDevF32, kDevF32)) == cudaSuccess &&
      attributes.binaryVersion >= 90) {
    most = kMaxRowCluster;
  }
  if (cached) of[device].store(most);
  return most;
}

cudaError_t LaunchClusterRows(const RowSegment* segments, const RowItem* items,
                              const RowLaunch& launch, cudaStream_t stream) {
  if (launch.cluster < 2 || launch.cluster > kMaxRowCluster) return cudaErrorInvalidValue;
  cudaLaunchConfig_t config = {};
  config.gridDim =
      dim3(static_cast<unsigned>(launch.count) * static_cast<unsigned>(launch.cluster));
  config.blockDim = dim3(static_cast<unsigned>(launch.threads));
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = static_cast<unsigned>(launch.cluster);
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, ForX(launch.x_dtype, launch.y_dtype), segments,
                            items + launch.first);
}

}  // namespace normd::kernels::cuda
