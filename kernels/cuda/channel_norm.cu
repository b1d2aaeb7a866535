// CUDA BatchNorm / GroupNorm / InstanceNorm. Statistics: each statistic set (a channel
// over N x S for BatchNorm, a (sample, group) over C/G x S for GroupNorm) is split into
// `splits` chunks so that few sets still fill every SM; a block sums its chunk's
// deviations from the set's first element and their squares in double (exact differences
// of fp32 values, so the variance keeps its precision however far the data lie from 0:
// an element lies within sqrt(n) sigma of its set's mean), and a second kernel adds the
// chunks in a fixed order (deterministic). Channels-last BatchNorm reads rows of up to 256
// channels a block, a thread a channel, so that a warp's loads are contiguous.
//
// The apply pass first turns each (sample, channel)'s statistics, weight and bias into
// fp32 {shift, dm, scale, bias} (mean = shift + dm; scale = w / sqrt(var + eps)), then
// reads x once in chunks of eight elements: y = ((x - shift) - dm) * scale + bias, one
// index division per chunk, none per element. Two reads of x in all, counted as such by
// the benchmark.
#include "kernels/cuda/row_chunks.cuh"

namespace normd::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float LoadAny(int32_t t, const void* p, int64_t i) {
  float v;
  LoadAnyK<1>(t, p, i, &v);
  return v;
}

// Set k, element 0 of it -> flat index (the set's shift).
__device__ __forceinline__ int64_t SetFirst(const ChannelArgs& a, int64_t k) {
  if (a.groups == 0) return a.channels_last ? k : k * a.s;
  const int64_t cpg = a.c / a.groups;
  const int64_t n = k / a.groups, g = k % a.groups;
  return a.channels_last ? n * a.s * a.c + g * cpg : (n * a.c + g * cpg) * a.s;
}

struct Sums {
  double n = 0, s1 = 0, s2 = 0;
  __device__ void Add(double d) {
    n += 1;
    s1 += d;
    s2 = fma(d, d, s2);
  }
};

__device__ __forceinline__ Sums WarpSums(Sums m) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    m.n += __shfl_xor_sync(0xffffffffu, m.n, o);
    m.s1 += __shfl_xor_sync(0xffffffffu, m.s1, o);
    m.s2 += __shfl_xor_sync(0xffffffffu, m.s2, o);
  }
  return m;
}

// The block's sums (every warp's, in warp order) written by thread 0 to out[0..3).
__device__ void BlockSumsTo(Sums m, double* out) {
  __shared__ double sh[3][32];
  m = WarpSums(m);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sh[0][warp] = m.n;
    sh[1][warp] = m.s1;
    sh[2][warp] = m.s2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    Sums total;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
      total.n += sh[0][w];
      total.s1 += sh[1][w];
      total.s2 += sh[2][w];
    }
    out[0] = total.n;
    out[1] = total.s1;
    out[2] = total.s2;
  }
}

// One block per (set k, split): blockIdx.x = k * splits + split; partials[k * splits +
// split] = (count, sum of d, sum of d^2), d = x - the set's first element. Every layout but
// channels-last BatchNorm.
template <int XT>
__global__ void __launch_bounds__(kThreads)
    PartialStats(ChannelArgs a, int splits, double* partials) {
  const int64_t k = blockIdx.x / splits;
  const int64_t split = blockIdx.x % splits;
  const int64_t size = a.groups == 0 ? a.n * a.s : (a.c / a.groups) * a.s;
  const int64_t chunk = (size + splits - 1) / splits;
  const int64_t begin = split * chunk;
  const int64_t end = min(size, begin + chunk);
  using E = typename Dev<XT>::Elem;
  const E* x = static_cast<const E*>(a.x);
  const double shift = Dev<XT>::Widen(x[SetFirst(a, k)]);
  Sums m;
  if (a.groups != 0 && !a.channels_last) {  // a contiguous set: vector loads
    if (begin < end) {
      ForEachLoadedChunk<XT>(x + SetFirst(a, k) + begin, end - begin, threadIdx.x, blockDim.x,
                             [&](int64_t, const float* v, auto kc) {
                               constexpr int K = decltype(kc)::value;
#pragma unroll
                               for (int q = 0; q < K; ++q) m.Add(v[q] - shift);
                             });
    }
  } else {
    // Element j of the set is run j / run_len, position j % run_len, runs `stride` apart
    // from `base`: BatchNorm channels-first, runs of S (one per sample) C x S apart;
    // GroupNorm channels-last, runs of C/G (one per position) C apart. The thread steps
    // by blockDim.x without dividing per element.
    const int64_t run_len = a.groups == 0 ? a.s : a.c / a.groups;
    const int64_t stride = a.groups == 0 ? a.c * a.s : a.c;
    const int64_t base = SetFirst(a, k);
    int64_t j = begin + threadIdx.x;
    int64_t run = j / run_len, pos = j % run_len;
    const int64_t step_run = blockDim.x / run_len, step_pos = blockDim.x % run_len;
    for (; j < end; j += blockDim.x) {
      m.Add(static_cast<double>(Dev<XT>::Widen(x[base + run * stride + pos])) - shift);
      run += step_run;
      pos += step_pos;
      if (pos >= run_len) {
        pos -= run_len;
        ++run;
      }
    }
  }
  BlockSumsTo(m, partials + blockIdx.x * 3);
}

// Channels-last BatchNorm: block (split, tile) reads rows [split's range) of channels
// [tile * 256, + 256): thread t takes channel t % width of every (256 / width)-th row,
// width = the tile's channels; the threads of one channel are then added in row order.
template <int XT>
__global__ void __launch_bounds__(kThreads)
    PartialStatsChannelsLast(ChannelArgs a, int splits, double* partials) {
  __shared__ double sh[3][kThreads];
  const int64_t split = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kThreads;
  const int width = static_cast<int>(a.c - c0 < kThreads ? a.c - c0 : kThreads);
  const int lanes_per_row = width, rows_at_once = kThreads / width;
  const int t = threadIdx.x;
  const int col = t % lanes_per_row, row0 = t / lanes_per_row;
  const int64_t rows = a.n * a.s;
  const int64_t chunk = (rows + splits - 1) / splits;
  const int64_t begin = split * chunk, end = min(rows, begin + chunk);
  using E = typename Dev<XT>::Elem;
  const E* x = static_cast<const E*>(a.x);
  Sums m;
  if (row0 < rows_at_once) {
    const int64_t c = c0 + col;
    const double shift = Dev<XT>::Widen(x[c]);
    for (int64_t r = begin + row0; r < end; r += rows_at_once) {
      m.Add(static_cast<double>(Dev<XT>::Widen(x[r * a.c + c])) - shift);
    }
  }
  sh[0][t] = m.n;
  sh[1][t] = m.s1;
  sh[2][t] = m.s2;
  __syncthreads();
  if (t < width) {
    Sums total;
    for (int r = 0; r < rows_at_once; ++r) {
      total.n += sh[0][r * width + t];
      total.s1 += sh[1][r * width + t];
      total.s2 += sh[2][r * width + t];
    }
    double* out = partials + ((c0 + t) * splits + split) * 3;
    out[0] = total.n;
    out[1] = total.s1;
    out[2] = total.s2;
  }
}

// Set k's mean and variance from its merged sums (deviations from the set's first element).
__device__ void MergeSet(const ChannelArgs& a, int64_t k, const Sums& total, double* mean,
                         double* var) {
  const double shift = LoadAny(a.x_dtype, a.x, SetFirst(a, k));
  const double d1 = total.n > 0 ? total.s1 / total.n : 0.0;
  mean[k] = shift + d1;
  var[k] = total.n > 0 ? fmax(total.s2 / total.n - d1 * d1, 0.0) : 0.0;
}

// A warp per set: each lane sums every 32nd split's partial sums, then the warp adds the
// lanes' (a thread per set, walking a channels-last BatchNorm's 264 splits one load after
// another, took 55 us on an H100: half the call).
__global__ void MergeStats(ChannelArgs a, int64_t sets, int splits, const double* partials,
                           double* mean, double* var) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t k = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; k < sets;
       k += warps) {
    Sums total;
    for (int i = lane; i < splits; i += 32) {
      const double* p = partials + (k * splits + i) * 3;
      total.n += p[0];
      total.s1 += p[1];
      total.s2 += p[2];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      total.n += __shfl_xor_sync(0xffffffffu, total.n, o);
      total.s1 += __shfl_xor_sync(0xffffffffu, total.s1, o);
      total.s2 += __shfl_xor_sync(0xffffffffu, total.s2, o);
    }
    if (lane == 0) MergeSet(a, k, total, mean, var);
  }
}

__device__ void SetParams(const ChannelArgs& a, int64_t p, const double* mean, const double* var,
                          float4* params);

// params[p], p = c (BatchNorm) or n * C + c (GroupNorm).
__global__ void Params(ChannelArgs a, const double* mean, const double* var, float4* params) {
  const int64_t count = a.groups == 0 ? a.c : a.n * a.c;  // ChannelParamCount
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    SetParams(a, p, mean, var, params);
  }
}

__device__ void SetParams(const ChannelArgs& a, int64_t p, const double* mean, const double* var,
                          float4* params) {
  const int64_t c = p % a.c;
  const int64_t k = a.groups == 0 ? c : (p / a.c) * a.groups + c / (a.c / a.groups);
  const double m = mean[k];
  const float shift = static_cast<float>(m);
  const double inv = 1.0 / sqrt(var[k] + a.eps);
  const double w = a.weight ? a.weight[c] : 1.0;
  params[p] = make_float4(shift, static_cast<float>(m - shift), static_cast<float>(inv * w),
                          a.bias ? a.bias[c] : 0.0f);
}

// The params index of flat element e.
__device__ __forceinline__ int64_t ParamOf(const ChannelArgs& a, int64_t e) {
  int64_t n, c;
  if (a.channels_last) {
    c = e % a.c;
    n = e / (a.c * a.s);
  } else {
    const int64_t plane = e / a.s;
    c = plane % a.c;
    n = plane / a.c;
  }
  return a.groups == 0 ? c : n * a.c + c;
}

template <int XT, int YT>
__global__ void __launch_bounds__(kThreads) Apply(ChannelArgs a, const float4* params) {
  constexpr int K = 8;
  const int64_t total = a.n * a.c * a.s;
  const int64_t chunks = (total + K - 1) / K;
  using YE = typename Dev<YT>::Elem;
  YE* y = static_cast<YE*>(a.y);
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < chunks;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e0 = q * K;
    float v[K], out[K];
    int64_t p[K];
    if (e0 + K <= total) {
      LoadK<XT, K>(a.x, e0, v);
      // Where the chunk stays in one plane (channels-first) or one row (channels-last),
      // its indices follow from the first.
      if (a.channels_last) {
        const int64_t row = e0 / a.c, c0 = e0 - row * a.c;
        if (c0 + K <= a.c) {
          const int64_t at = (a.groups == 0 ? 0 : (row / a.s) * a.c) + c0;
#pragma unroll
          for (int j = 0; j < K; ++j) p[j] = at + j;
        } else {
#pragma unroll
          for (int j = 0; j < K; ++j) p[j] = ParamOf(a, e0 + j);
        }
      } else {
        const int64_t plane = e0 / a.s, s0 = e0 - plane * a.s;
        if (s0 + K <= a.s) {
          const int64_t at = a.groups == 0 ? plane % a.c : plane;
#pragma unroll
          for (int j = 0; j < K; ++j) p[j] = at;
        } else {
#pragma unroll
          for (int j = 0; j < K; ++j) p[j] = ParamOf(a, e0 + j);
        }
      }
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const float4 pr = __ldg(params + p[j]);
        out[j] = __fmaf_rn((v[j] - pr.x) - pr.y, pr.z, pr.w);
      }
      alignas(16) YE packed[K];
#pragma unroll
      for (int j = 0; j < K; ++j) packed[j] = Dev<YT>::Narrow(out[j]);
      YE* dst = y + e0;
      constexpr int kBytes = K * static_cast<int>(sizeof(YE));
      if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
#pragma unroll
        for (int h = 0; h < kBytes / 16; ++h) {
          reinterpret_cast<uint4*>(dst)[h] = reinterpret_cast<const uint4*>(packed)[h];
        }
      } else {
#pragma unroll
        for (int j = 0; j < K; ++j) dst[j] = packed[j];
      }
    } else {
      for (int64_t e = e0; e < total; ++e) {
        const float4 pr = __ldg(params + ParamOf(a, e));
        float x;
        LoadK<XT, 1>(a.x, e, &x);
        y[e] = Dev<YT>::Narrow(__fmaf_rn((x - pr.x) - pr.y, pr.z, pr.w));
      }
    }
  }
}

__global__ void Widen(int32_t t, const void* src, int64_t n, float offset, float* dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = LoadAny(t, src, i) + offset;
  }
}

int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

template <int XT>
void LaunchPartials(const ChannelArgs& a, int splits, double* partials, cudaStream_t stream) {
  if (a.groups == 0 && a.channels_last) {
    const dim3 grid(static_cast<unsigned>(splits),
                    static_cast<unsigned>((a.c + kThreads - 1) / kThreads));
    PartialStatsChannelsLast<XT><<<grid, kThreads, 0, stream>>>(a, splits, partials);
  } else {
    const int64_t sets = a.groups == 0 ? a.c : a.n * a.groups;
    PartialStats<XT>
        <<<static_cast<unsigned>(sets * splits), kThreads, 0, stream>>>(a, splits, partials);
  }
}

template <int XT>
void LaunchApply(const ChannelArgs& a, const float4* params, int64_t chunks, cudaStream_t stream) {
  if (a.y_dtype == kDevF32) {
    Apply<XT, kDevF32><<<GridFor(chunks), kThreads, 0, stream>>>(a, params);
  } else if (a.y_dtype == kDevF16) {
    Apply<XT, kDevF16><<<GridFor(chunks), kThreads, 0, stream>>>(a, params);
  } else {
    Apply<XT, kDevBF16><<<GridFor(chunks), kThreads, 0, stream>>>(a, params);
  }
}

}  // namespace

cudaError_t LaunchChannelStats(const ChannelArgs& a, int splits, double* partials, double* mean,
                               double* var, cudaStream_t stream) {
  const int64_t sets = a.groups == 0 ? a.c : a.n * a.groups;
  if (sets == 0) return cudaSuccess;
  if (a.x_dtype == kDevF32) {
    LaunchPartials<kDevF32>(a, splits, partials, stream);
  } else if (a.x_dtype == kDevF16) {
    LaunchPartials<kDevF16>(a, splits, partials, stream);
  } else {
    LaunchPartials<kDevBF16>(a, splits, partials, stream);
  }
  MergeStats<<<GridFor(sets * 32), kThreads, 0, stream>>>(a, sets, splits, partials, mean, var);
  return cudaGetLastError();
}

cudaError_t LaunchChannelApply(const ChannelArgs& a, const double* mean, const double* var,
                               float4* params, cudaStream_t stream) {
  const int64_t total = a.n * a.c * a.s;
  if (total == 0) return cudaSuccess;
  const int64_t count = ChannelParamCount(a);
  Params<<<GridFor(count), kThreads, 0, stream>>>(a, mean, var, params);
  const int64_t chunks = (total + 7) / 8;
  if (a.x_dtype == kDevF32) {
    LaunchApply<kDevF32>(a, params, chunks, stream);
  } else if (a.x_dtype == kDevF16) {
    LaunchApply<kDevF16>(a, params, chunks, stream);
  } else {
    LaunchApply<kDevBF16>(a, params, chunks, stream);
  }
  return cudaGetLastError();
}

cudaError_t LaunchWiden(int32_t dtype, const void* src, int64_t n, float offset, float* dst,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  Widen<<<GridFor(n), kThreads, 0, stream>>>(dtype, src, n, offset, dst);
  return cudaGetLastError();
}

}  // namespace normd::kernels::cuda
