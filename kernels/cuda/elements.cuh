// Device helpers shared by the CUDA kernels: element loads/stores by dtype code with
// round-to-nearest-even narrowing, 16-byte vector walks over a row with a peeled head and
// tail (rows of any length at any alignment), and warp/block reductions in double.
#ifndef NORMD_KERNELS_CUDA_ELEMENTS_CUH_
#define NORMD_KERNELS_CUDA_ELEMENTS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/device_ops.h"

namespace normd::kernels::cuda {

__device__ __forceinline__ float LoadAt(int32_t t, const void* p, int64_t i) {
  if (t == kDevF32) return static_cast<const float*>(p)[i];
  if (t == kDevF16) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ __forceinline__ void StoreAt(int32_t t, void* p, int64_t i, float v) {
  if (t == kDevF32) {
    static_cast<float*>(p)[i] = v;
  } else if (t == kDevF16) {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  } else {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
}

// x rounded to dtype t and back (cast_before_weight).
__device__ __forceinline__ float RoundTo(int32_t t, float v) {
  if (t == kDevF16) return __half2float(__float2half_rn(v));
  if (t == kDevBF16) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

__device__ __forceinline__ int ElemBytes(int32_t t) { return t == kDevF32 ? 4 : 2; }

// Calls f(i, value) for every i in [0, n) of the row at p, the threads of a group
// (lane in [0, width)) sharing the work: a scalar head up to 16-byte alignment, 16-byte
// vector loads, a scalar tail.
template <class F>
__device__ __forceinline__ void ForEachLoaded(int32_t t, const void* p, int64_t n, int lane,
                                              int width, F f) {
  const int eb = ElemBytes(t);
  const int per_vec = 16 / eb;
  int64_t head = ((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15) / eb;
  if (head > n) head = n;
  for (int64_t i = lane; i < head; i += width) f(i, LoadAt(t, p, i));
  const int64_t vecs = (n - head) / per_vec;
  const uint4* pv = reinterpret_cast<const uint4*>(static_cast<const char*>(p) + head * eb);
  for (int64_t v = lane; v < vecs; v += width) {
    const uint4 raw = __ldg(pv + v);
    const int64_t base = head + v * per_vec;
    if (t == kDevF32) {
      const float* e = reinterpret_cast<const float*>(&raw);
#pragma unroll
      for (int k = 0; k < 4; ++k) f(base + k, e[k]);
    } else if (t == kDevF16) {
      const __half* e = reinterpret_cast<const __half*>(&raw);
#pragma unroll
      for (int k = 0; k < 8; ++k) f(base + k, __half2float(e[k]));
    } else {
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
      for (int k = 0; k < 8; ++k) f(base + k, __bfloat162float(e[k]));
    }
  }
  for (int64_t i = head + vecs * per_vec + lane; i < n; i += width) f(i, LoadAt(t, p, i));
}

// Stores g(i) for every i in [0, n) of the row at p with 16-byte vector stores where the
// row is aligned (scalar head and tail).
template <class G>
__device__ __forceinline__ void ForEachStored(int32_t t, void* p, int64_t n, int lane, int width,
                                              G g) {
  const int eb = ElemBytes(t);
  const int per_vec = 16 / eb;
  int64_t head = ((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15) / eb;
  if (head > n) head = n;
  for (int64_t i = lane; i < head; i += width) StoreAt(t, p, i, g(i));
  const int64_t vecs = (n - head) / per_vec;
  uint4* pv = reinterpret_cast<uint4*>(static_cast<char*>(p) + head * eb);
  for (int64_t v = lane; v < vecs; v += width) {
    const int64_t base = head + v * per_vec;
    uint4 raw;
    if (t == kDevF32) {
      float* e = reinterpret_cast<float*>(&raw);
#pragma unroll
      for (int k = 0; k < 4; ++k) e[k] = g(base + k);
    } else if (t == kDevF16) {
      __half* e = reinterpret_cast<__half*>(&raw);
#pragma unroll
      for (int k = 0; k < 8; ++k) e[k] = __float2half_rn(g(base + k));
    } else {
      __nv_bfloat16* e = reinterpret_cast<__nv_bfloat16*>(&raw);
#pragma unroll
      for (int k = 0; k < 8; ++k) e[k] = __float2bfloat16_rn(g(base + k));
    }
    pv[v] = raw;
  }
  for (int64_t i = head + vecs * per_vec + lane; i < n; i += width) StoreAt(t, p, i, g(i));
}

__device__ __forceinline__ double WarpSum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 doubles; the block must reach this call together.
__device__ __forceinline__ double BlockSum(double v, double* scratch) {
  v = WarpSum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? scratch[lane] : 0.0;
  return WarpSum(v);
}

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_ELEMENTS_CUH_
