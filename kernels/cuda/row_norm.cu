// The CUDA row kernel: LayerNorm, RMSNorm (offset, partial, cast_before_weight), L2Norm
// and their residual fusions over a ragged batch of segments in one launch. Each block
// takes one RowItem: up to 8 rows of at most kWarpRowMaxCols, a warp each, or one longer
// row for the whole block. The row is read from global memory once (16-byte vector loads
// with a peeled head and tail), widened to fp32 (h formed in fp32) into shared memory,
// and its statistics accumulated in double: the same precision plan as the CPU backend,
// so both meet docs/semantics.md's one-ulp rule the same way. Rows too long for shared memory
// are read a second time from global memory (L2) instead.
#include <algorithm>

#include "kernels/cuda/elements.cuh"

namespace normd::kernels::cuda {
namespace {

struct WarpGroup {
  __device__ static double Sum(double v, double*) { return WarpSum(v); }
  __device__ static void Sync() { __syncwarp(); }
};
struct BlockGroup {
  __device__ static double Sum(double v, double* scratch) { return BlockSum(v, scratch); }
  __device__ static void Sync() { __syncthreads(); }
};

template <class Group>
__device__ void RowWork(const RowSegment& s, int64_t r, float* buf, int lane, int width,
                        double* scratch) {
  const int xb = ElemBytes(s.x_dtype), yb = ElemBytes(s.y_dtype);
  const int64_t off = r * s.cols;
  const void* x = static_cast<const char*>(s.x) + off * xb;
  const void* skip = s.skip ? static_cast<const char*>(s.skip) + off * xb : nullptr;
  void* y = static_cast<char*>(s.y) + off * yb;
  void* h = s.h ? static_cast<char*>(s.h) + off * xb : nullptr;
  const double alpha = s.alpha;
  const bool add_then_norm = s.residual == 1;

  // The normalized quantity: x, or h = alpha * skip + x rounded once to fp32.
  auto input = [&](int64_t i, float v) -> float {
    if (add_then_norm) v = static_cast<float>(alpha * LoadAt(s.x_dtype, skip, i) + v);
    return v;
  };
  double sum = 0, ss = 0;
  ForEachLoaded(s.x_dtype, x, s.cols, lane, width, [&](int64_t i, float raw) {
    const float v = input(i, raw);
    if (buf) buf[i] = v;
    if (s.kind == 0) {
      sum += v;
    } else if (i < s.partial_m) {
      ss += static_cast<double>(v) * v;
    }
  });
  auto value = [&](int64_t i) -> float { return buf ? buf[i] : input(i, LoadAt(s.x_dtype, x, i)); };

  double mean = 0, scale = 1;
  if (s.kind == 0) {
    mean = Group::Sum(sum, scratch) / static_cast<double>(s.cols);
    Group::Sync();
    double m2 = 0;
    for (int64_t i = lane; i < s.cols; i += width) {
      const double d = value(i) - mean;
      m2 += d * d;
    }
    const double var = Group::Sum(m2, scratch) / static_cast<double>(s.cols);
    scale = s.eps_inside ? 1.0 / sqrt(var + s.eps) : 1.0 / (sqrt(var) + s.eps);
  } else {
    ss = Group::Sum(ss, scratch);
    if (s.kind == 1) {
      const double ms = ss / static_cast<double>(s.partial_m);
      scale = s.eps_inside ? 1.0 / sqrt(ms + s.eps) : 1.0 / (sqrt(ms) + s.eps);
    } else {
      scale = 1.0 / fmax(sqrt(ss), s.eps);
    }
  }
  Group::Sync();  // every lane's buf entries are visible to every other lane

  if (h) ForEachStored(s.x_dtype, h, s.cols, lane, width, [&](int64_t i) { return value(i); });
  ForEachStored(s.y_dtype, y, s.cols, lane, width, [&](int64_t i) -> float {
    double n = (value(i) - mean) * scale;
    if (s.kind == 1 && s.cast_before_weight) n = RoundTo(s.x_dtype, static_cast<float>(n));
    if (s.weight) n *= s.weight[i];
    if (s.bias) n += s.bias[i];
    if (s.residual == 2) n += alpha * LoadAt(s.x_dtype, s.skip, off + i);
    return static_cast<float>(n);
  });
}

__global__ void __launch_bounds__(kRowBlockThreads)
    RowNormKernel(const RowSegment* segments, const RowItem* items, int64_t smem_floats) {
  extern __shared__ float smem[];
  __shared__ double scratch[32];
  const RowItem item = items[blockIdx.x];
  const RowSegment& s = segments[item.segment];
  if (item.warp_rows) {
    const int warp = threadIdx.x / 32;
    if (warp < item.count) {
      RowWork<WarpGroup>(s, item.first_row + warp, smem + warp * kWarpRowMaxCols, threadIdx.x % 32,
                         32, scratch);
    }
  } else {
    RowWork<BlockGroup>(s, item.first_row, s.cols <= smem_floats ? smem : nullptr, threadIdx.x,
                        blockDim.x, scratch);
  }
}

// The largest dynamic shared memory a block of this kernel may have, set once.
int64_t MaxSmemBytes() {
  static const int64_t bytes = [] {
    int device = 0, optin = 48 << 10;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    const int64_t usable = optin - 1024;  // the static scratch and some slack
    cudaFuncSetAttribute(RowNormKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(usable));
    return usable;
  }();
  return bytes;
}

}  // namespace

cudaError_t LaunchRowNorm(const RowSegment* segments, const RowItem* items, int num_items,
                          int64_t max_block_cols, cudaStream_t stream) {
  if (num_items == 0) return cudaSuccess;
  const int64_t limit = MaxSmemBytes();
  const int64_t warp_bytes = int64_t{8} * kWarpRowMaxCols * sizeof(float);
  const int64_t block_bytes = max_block_cols * static_cast<int64_t>(sizeof(float));
  // Block rows longer than the limit read twice from global memory instead.
  const int64_t bytes = std::min(limit, std::max(warp_bytes, block_bytes));
  RowNormKernel<<<num_items, kRowBlockThreads, bytes, stream>>>(
      segments, items, bytes / static_cast<int64_t>(sizeof(float)));
  return cudaGetLastError();
}

}  // namespace normd::kernels::cuda
