// CUDA BatchNorm / GroupNorm / InstanceNorm. Statistics: each statistic set (a channel
// over N x S for BatchNorm, a (sample, group) over C/G x S for GroupNorm) is split into
// `splits` chunks so that few sets still fill every SM; a block computes its chunk's
// (count, mean, M2) with per-thread Welford in double merged by Chan's formula, and a
// second kernel merges the chunks in a fixed order (deterministic). The apply kernel then
// reads x once more: two reads of x in all, counted as such by the benchmark.
#include "kernels/cuda/elements.cuh"

namespace normd::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct Moments {
  double n = 0, mean = 0, m2 = 0;
};

__device__ __forceinline__ Moments Merge(Moments a, Moments b) {
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  const double n = a.n + b.n;
  const double d = b.mean - a.mean;
  Moments out;
  out.n = n;
  out.mean = a.mean + d * (b.n / n);
  out.m2 = a.m2 + b.m2 + d * d * (a.n * b.n / n);
  return out;
}

__device__ __forceinline__ Moments ShuffleMerge(Moments m) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Moments other;
    other.n = __shfl_xor_sync(0xffffffffu, m.n, o);
    other.mean = __shfl_xor_sync(0xffffffffu, m.mean, o);
    other.m2 = __shfl_xor_sync(0xffffffffu, m.m2, o);
    m = Merge(m, other);
  }
  return m;
}

// Set k, element j of it -> flat index.
__device__ __forceinline__ int64_t SetElement(const ChannelArgs& a, int64_t k, int64_t j) {
  if (a.groups == 0) {  // BatchNorm: channel k over (n, s)
    const int64_t n = j / a.s, s = j % a.s;
    return a.channels_last ? (n * a.s + s) * a.c + k : (n * a.c + k) * a.s + s;
  }
  const int64_t cpg = a.c / a.groups;
  const int64_t n = k / a.groups, g = k % a.groups;
  if (!a.channels_last) return n * a.c * a.s + g * cpg * a.s + j;  // contiguous
  const int64_t s = j / cpg, c = g * cpg + j % cpg;
  return (n * a.s + s) * a.c + c;
}

__device__ __forceinline__ int64_t SetSize(const ChannelArgs& a) {
  return a.groups == 0 ? a.n * a.s : (a.c / a.groups) * a.s;
}

// One block per (set k, split): blockIdx.x = k * splits + split.
// partials[k * splits + split] = (n, mean, m2).
__global__ void __launch_bounds__(kThreads)
    PartialStats(ChannelArgs a, int splits, double* partials) {
  const int64_t k = blockIdx.x / splits;
  const int64_t split = blockIdx.x % splits;
  const int64_t size = SetSize(a);
  const int64_t chunk = (size + splits - 1) / splits;
  const int64_t begin = split * chunk;
  const int64_t end = min(size, begin + chunk);
  Moments m;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const double v = LoadAt(a.x_dtype, a.x, SetElement(a, k, j));
    m.n += 1;
    const double d = v - m.mean;
    m.mean += d / m.n;
    m.m2 += d * (v - m.mean);
  }
  m = ShuffleMerge(m);
  __shared__ double sh[3][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sh[0][warp] = m.n;
    sh[1][warp] = m.mean;
    sh[2][warp] = m.m2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    Moments total;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
      total = Merge(total, Moments{sh[0][w], sh[1][w], sh[2][w]});
    }
    double* out = partials + blockIdx.x * 3;
    out[0] = total.n;
    out[1] = total.mean;
    out[2] = total.m2;
  }
}

__global__ void MergeStats(int64_t sets, int splits, const double* partials, double* mean,
                           double* var) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= sets) return;
  Moments total;
  for (int i = 0; i < splits; ++i) {
    const double* p = partials + (k * splits + i) * 3;
    total = Merge(total, Moments{p[0], p[1], p[2]});
  }
  mean[k] = total.mean;
  var[k] = total.n > 0 ? total.m2 / total.n : 0.0;
}

__global__ void __launch_bounds__(kThreads)
    Apply(ChannelArgs a, const double* mean, const double* var) {
  const int64_t total = a.n * a.c * a.s;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = a.channels_last ? e % a.c : (e / a.s) % a.c;
    const int64_t k = a.groups == 0 ? c : (e / (a.c * a.s)) * a.groups + c / (a.c / a.groups);
    double v = (LoadAt(a.x_dtype, a.x, e) - mean[k]) / sqrt(var[k] + a.eps);
    if (a.weight) v *= a.weight[c];
    if (a.bias) v += a.bias[c];
    StoreAt(a.y_dtype, a.y, e, static_cast<float>(v));
  }
}

__global__ void Widen(int32_t t, const void* src, int64_t n, float offset, float* dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = LoadAt(t, src, i) + offset;
  }
}

__global__ void Narrow(const double* src, int64_t n, int32_t t, void* dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    StoreAt(t, dst, i, static_cast<float>(src[i]));
  }
}

int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

}  // namespace

cudaError_t LaunchChannelStats(const ChannelArgs& a, int splits, double* partials, double* mean,
                               double* var, cudaStream_t stream) {
  const int64_t sets = a.groups == 0 ? a.c : a.n * a.groups;
  if (sets == 0) return cudaSuccess;
  PartialStats<<<static_cast<unsigned>(sets * splits), kThreads, 0, stream>>>(a, splits, partials);
  MergeStats<<<GridFor(sets), kThreads, 0, stream>>>(sets, splits, partials, mean, var);
  return cudaGetLastError();
}

cudaError_t LaunchChannelApply(const ChannelArgs& a, const double* mean, const double* var,
                               cudaStream_t stream) {
  const int64_t total = a.n * a.c * a.s;
  if (total == 0) return cudaSuccess;
  Apply<<<GridFor(total), kThreads, 0, stream>>>(a, mean, var);
  return cudaGetLastError();
}

cudaError_t LaunchWiden(int32_t dtype, const void* src, int64_t n, float offset, float* dst,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  Widen<<<GridFor(n), kThreads, 0, stream>>>(dtype, src, n, offset, dst);
  return cudaGetLastError();
}

cudaError_t LaunchNarrow(const double* src, int64_t n, int32_t dtype, void* dst,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  Narrow<<<GridFor(n), kThreads, 0, stream>>>(src, n, dtype, dst);
  return cudaGetLastError();
}

}  // namespace normd::kernels::cuda
