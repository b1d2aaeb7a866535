// Device helpers shared by the channel kernels (channel_norm.cu: statistics and their
// merge; channel_apply.cu: the apply pass and its parameters): the block size, a run-time
// dtype load, a statistic set's first element, and the apply pass's parameters of a channel.
//
// Thread safety: device functions without state.
#ifndef NORMD_KERNELS_CUDA_CHANNEL_COMMON_CUH_
#define NORMD_KERNELS_CUDA_CHANNEL_COMMON_CUH_

#include "kernels/cuda/row_chunks.cuh"

namespace normd::kernels::cuda::channel {

inline constexpr int kThreads = 256;

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

// The apply pass's parameters for a channel of a set with mean m and variance v, weight w
// and bias b: {shift, dm, scale, bias}.
__device__ __forceinline__ float4 ParamsOf(const ChannelArgs& a, double m, double v, double w,
                                           float b) {
  const float shift = static_cast<float>(m);
  const double inv = 1.0 / sqrt(v + a.eps);
  return make_float4(shift, static_cast<float>(m - shift), static_cast<float>(inv * w), b);
}
__device__ __forceinline__ double WeightOf(const ChannelArgs& a, int64_t c) {
  return a.weight ? LoadAny(a.w_dtype, a.weight, c) : 1.0;
}
__device__ __forceinline__ float BiasOf(const ChannelArgs& a, int64_t c) {
  return a.bias ? LoadAny(a.b_dtype, a.bias, c) : 0.0f;
}

// Blocks of kThreads for n threads' work, at least 1, at most 65536 (kernels stride over
// the rest).
inline int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

}  // namespace normd::kernels::cuda::channel

#endif  // NORMD_KERNELS_CUDA_CHANNEL_COMMON_CUH_
