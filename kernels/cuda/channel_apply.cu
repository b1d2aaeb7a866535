// CUDA BatchNorm / GroupNorm / InstanceNorm: the apply pass, from per-(sample, channel) fp32
// parameters {shift, dm, scale, bias} (MergeStats in channel_norm.cu writes them with the
// statistics; Params here from given ones, inference BatchNorm's running statistics).
// The apply pass reads x once: channels-last, a thread keeps the parameters of its eight
// channels in registers and walks rows; otherwise chunks of eight elements of the flat
// tensor, a chunk's parameter index found with one 32-bit division by a multiplication
// (FastDiv) and its parameters loaded once where the chunk lies in one plane. Two reads of
// x in all, counted as such by the benchmark; three launches (inference: two).
#include "kernels/cuda/channel_common.cuh"

namespace normd::kernels::cuda {
namespace {

using channel::BiasOf;
using channel::GridFor;
using channel::kThreads;
using channel::ParamsOf;
using channel::WeightOf;

// params[p] from given statistics: p = c (BatchNorm) or n * C + c (GroupNorm).
__global__ void Params(ChannelArgs a, const double* mean, const double* var, float4* params) {
  const int64_t count = a.groups == 0 ? a.c : a.n * a.c;  // ChannelParamCount
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = p % a.c;
    const int64_t k = a.groups == 0 ? c : (p / a.c) * a.groups + c / (a.c / a.groups);
    params[p] = ParamsOf(a, mean[k], var[k], WeightOf(a, c), BiasOf(a, c));
  }
}

// The params index of flat element e.
__device__ __forceinline__ int64_t ParamOf(const ChannelArgs& a, int64_t e, const FastDiv& by_c,
                                           const FastDiv& by_s) {
  int64_t n, c;
  if (a.channels_last) {
    const int64_t row = by_c.Div(e);
    c = e - row * a.c;
    n = by_s.Div(row);
  } else {
    const int64_t plane = by_s.Div(e);
    n = by_c.Div(plane);
    c = plane - n * a.c;
  }
  return a.groups == 0 ? c : n * a.c + c;
}

__device__ __forceinline__ float Affine(float x, const float4& p) {
  return __fmaf_rn((x - p.x) - p.y, p.z, p.w);
}

// Stores K values at y[e0..e0+K) as YT: 16-byte stores where y + e0 is aligned.
template <int YT, int K>
__device__ __forceinline__ void StoreK(void* y, int64_t e0, const float* out) {
  using YE = typename Dev<YT>::Elem;
  alignas(16) YE packed[K];
#pragma unroll
  for (int j = 0; j < K; ++j) packed[j] = Dev<YT>::Narrow(out[j]);
  YE* dst = static_cast<YE*>(y) + e0;
  constexpr int kBytes = K * static_cast<int>(sizeof(YE));
  if (kBytes % 16 == 0 && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
#pragma unroll
    for (int h = 0; h < kBytes / 16; ++h) {
      reinterpret_cast<uint4*>(dst)[h] = reinterpret_cast<const uint4*>(packed)[h];
    }
  } else {
#pragma unroll
    for (int j = 0; j < K; ++j) dst[j] = packed[j];
  }
}

constexpr int kChunk = 8;

// Channels-last with C a multiple of 8, at most 2048: block (bx, sample for GroupNorm)
// walks rows of its row group; thread t takes channels [(t % lanes) * 8, + 8) of every
// (256 / lanes)-th row, lanes = C / 8, with their parameters held in registers, and four
// rows' loads in flight.
template <int XT, int YT>
__global__ void __launch_bounds__(kThreads, 3)
    ApplyChannelsLast(ChannelArgs a, const float4* params) {
  const int lanes = static_cast<int>(a.c / kChunk), rows_at_once = kThreads / lanes;
  const int lane = threadIdx.x % lanes, row0 = threadIdx.x / lanes;
  if (row0 >= rows_at_once) return;
  const bool gn = a.groups != 0;
  const int64_t rows = gn ? a.s : a.n * a.s;
  const int64_t first_row = gn ? static_cast<int64_t>(blockIdx.y) * a.s : 0;
  const float4* p = params + (gn ? static_cast<int64_t>(blockIdx.y) * a.c : 0) + lane * kChunk;
  float4 pr[kChunk];
#pragma unroll
  for (int j = 0; j < kChunk; ++j) pr[j] = __ldg(p + j);
  using XE = typename Dev<XT>::Elem;
  // A row's eight elements are one or two aligned 16-byte vectors (LaunchApplyAs checks x
  // and y); four vectors in flight, kept raw until used (widened, four rows of f16 would
  // not fit beside the parameters in registers).
  constexpr int kRaw = kChunk * static_cast<int>(sizeof(XE)) / 16;
  constexpr int kU = 4 / kRaw;
  const XE* x = static_cast<const XE*>(a.x) + first_row * a.c + lane * kChunk;
  const int64_t at = first_row * a.c + lane * kChunk;
  const int64_t step = static_cast<int64_t>(gridDim.x) * rows_at_once;
  auto finish = [&](const uint4* raw, int64_t r) {
    const XE* e = reinterpret_cast<const XE*>(raw);
    float v[kChunk];
#pragma unroll
    for (int j = 0; j < kChunk; ++j) v[j] = Affine(Dev<XT>::Widen(e[j]), pr[j]);
    StoreK<YT, kChunk>(a.y, at + r * a.c, v);
  };
  int64_t r = static_cast<int64_t>(blockIdx.x) * rows_at_once + row0;
  for (; r + (kU - 1) * step < rows; r += kU * step) {
    uint4 raw[kU][kRaw];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
#pragma unroll
      for (int h = 0; h < kRaw; ++h) {
        raw[u][h] = __ldg(reinterpret_cast<const uint4*>(x + (r + u * step) * a.c) + h);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) finish(raw[u], r + u * step);
  }
  for (; r < rows; r += step) {
    uint4 raw[kRaw];
#pragma unroll
    for (int h = 0; h < kRaw; ++h) raw[h] = __ldg(reinterpret_cast<const uint4*>(x + r * a.c) + h);
    finish(raw, r);
  }
}

// Every other layout and shape: chunks of eight elements of the flat tensor.
template <int XT, int YT>
__global__ void __launch_bounds__(kThreads)
    ApplyFlat(ChannelArgs a, const float4* params, FastDiv by_c, FastDiv by_s) {
  const int64_t total = a.n * a.c * a.s;
  const int64_t chunks = (total + kChunk - 1) / kChunk;
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < chunks;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e0 = q * kChunk;
    float v[kChunk];
    if (e0 + kChunk <= total) {
      LoadK<XT, kChunk>(a.x, e0, v);
      bool one_plane = false;
      int64_t at = 0;
      if (!a.channels_last) {
        const int64_t plane = by_s.Div(e0);
        one_plane = e0 - plane * a.s + kChunk <= a.s;
        at = a.groups == 0 ? plane - by_c.Div(plane) * a.c : plane;
      }
      if (one_plane) {
        const float4 pr = __ldg(params + at);
#pragma unroll
        for (int j = 0; j < kChunk; ++j) v[j] = Affine(v[j], pr);
      } else {
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
          v[j] = Affine(v[j], __ldg(params + ParamOf(a, e0 + j, by_c, by_s)));
      }
      StoreK<YT, kChunk>(a.y, e0, v);
    } else {
      using YE = typename Dev<YT>::Elem;
      for (int64_t e = e0; e < total; ++e) {
        float x;
        LoadK<XT, 1>(a.x, e, &x);
        static_cast<YE*>(a.y)[e] =
            Dev<YT>::Narrow(Affine(x, __ldg(params + ParamOf(a, e, by_c, by_s))));
      }
    }
  }
}

template <int XT, int YT>
void LaunchApplyAs(const ChannelArgs& a, const float4* params, cudaStream_t stream) {
  const int64_t total = a.n * a.c * a.s;
  const bool groups_fit = a.groups == 0 || a.n <= 65535;
  const bool aligned =
      (reinterpret_cast<uintptr_t>(a.x) & 15) == 0 && (reinterpret_cast<uintptr_t>(a.y) & 15) == 0;
  if (a.channels_last && a.c % kChunk == 0 && a.c / kChunk <= kThreads && groups_fit && aligned) {
    const int64_t rows = a.groups == 0 ? a.n * a.s : a.s;
    const int64_t rows_at_once = kThreads / (a.c / kChunk);
    const int64_t row_groups = a.groups == 0 ? 1 : a.n;
    // One wave of three blocks an SM (each thread's eight parameters are loaded once for
    // all its rows), fewer where there are not rows for them.
    int device = 0, sms = 132;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      sms = 132;
    }
    const int64_t wave = std::max<int64_t>(1, 3 * static_cast<int64_t>(sms) / row_groups);
    const int64_t blocks =
        std::clamp<int64_t>(std::min((rows + rows_at_once - 1) / rows_at_once, wave), 1, 65535);
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(row_groups));
    ApplyChannelsLast<XT, YT><<<grid, kThreads, 0, stream>>>(a, params);
    return;
  }
  const FastDiv by_c(a.c, total), by_s(a.s, total);
  ApplyFlat<XT, YT>
      <<<GridFor((total + kChunk - 1) / kChunk), kThreads, 0, stream>>>(a, params, by_c, by_s);
}

template <int XT>
void LaunchApply(const ChannelArgs& a, const float4* params, cudaStream_t stream) {
  if (a.y_dtype == kDevF32) {
    LaunchApplyAs<XT, kDevF32>(a, params, stream);
  } else if (a.y_dtype == kDevF16) {
    LaunchApplyAs<XT, kDevF16>(a, params, stream);
  } else {
    LaunchApplyAs<XT, kDevBF16>(a, params, stream);
  }
}

}  // namespace

cudaError_t LaunchChannelParams(const ChannelArgs& a, const double* mean, const double* var,
                                float4* params, cudaStream_t stream) {
  const int64_t count = ChannelParamCount(a);
  if (count == 0) return cudaSuccess;
  Params<<<GridFor(count), kThreads, 0, stream>>>(a, mean, var, params);
  return cudaGetLastError();
}

cudaError_t LaunchChannelApply(const ChannelArgs& a, const float4* params, cudaStream_t stream) {
  if (a.n * a.c * a.s == 0) return cudaSuccess;
  if (a.x_dtype == kDevF32) {
    LaunchApply<kDevF32>(a, params, stream);
  } else if (a.x_dtype == kDevF16) {
    LaunchApply<kDevF16>(a, params, stream);
  } else {
    LaunchApply<kDevBF16>(a, params, stream);
  }
  return cudaGetLastError();
}

}  // namespace normd::kernels::cuda
