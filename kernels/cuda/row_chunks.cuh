// Device helpers of the CUDA kernels (row_norm.cu, channel_norm.cu): element types as template
// parameters (Dev<kDevF32> and so on, chosen once per row on the device instead of per element),
// and walks over a row in chunks of one 16-byte vector: a scalar head up to the row's 16-byte
// alignment, aligned vector loads issued four or two at a time (bytes in flight are what
// a memory-bound kernel runs on), a scalar tail. Callbacks get a chunk's first index, its
// values widened to fp32 and their count as a compile-time constant (std::integral_constant),
// so that every chunk-sized loop in them unrolls. WarpGroup and BlockGroup sum a row's
// statistics over the threads that share it.
//
// Thread safety: device functions without state; each thread calls them on its own data.
#ifndef NORMD_KERNELS_CUDA_ROW_CHUNKS_CUH_
#define NORMD_KERNELS_CUDA_ROW_CHUNKS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_ops.h"

namespace normd::kernels::cuda {

template <int T>
struct Dev;
template <>
struct Dev<kDevF32> {
  using Elem = float;
  static constexpr int kVec = 4;
  __device__ static float Widen(float v) { return v; }
  __device__ static float Narrow(float v) { return v; }
};
template <>
struct Dev<kDevF16> {
  using Elem = __half;
  static constexpr int kVec = 8;
  __device__ static float Widen(__half v) { return __half2float(v); }
  __device__ static __half Narrow(float v) { return __float2half_rn(v); }
};
template <>
struct Dev<kDevBF16> {
  using Elem = __nv_bfloat16;
  static constexpr int kVec = 8;
  __device__ static float Widen(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 Narrow(float v) { return __float2bfloat16_rn(v); }
};

template <int K>
using Count = std::integral_constant<int, K>;

// K elements of type T from p[base], widened: one vector load where K elements make 8, 16
// or 32 bytes and p + base is aligned to them (up to 16), else K scalar loads.
template <int T, int K>
__device__ __forceinline__ void LoadK(const void* p, int64_t base, float* out) {
  using D = Dev<T>;
  using E = typename D::Elem;
  const E* e = static_cast<const E*>(p) + base;
  constexpr int kBytes = K * static_cast<int>(sizeof(E));
  if constexpr (kBytes == 8 || kBytes == 16 || kBytes == 32) {
    constexpr int kAlign = kBytes < 16 ? kBytes : 16;
    if ((reinterpret_cast<uintptr_t>(e) & (kAlign - 1)) == 0) {
      alignas(16) E tmp[K];
      if constexpr (kBytes == 8) {
        *reinterpret_cast<uint2*>(tmp) = __ldg(reinterpret_cast<const uint2*>(e));
      } else {
#pragma unroll
        for (int q = 0; q < kBytes / 16; ++q) {
          reinterpret_cast<uint4*>(tmp)[q] = __ldg(reinterpret_cast<const uint4*>(e) + q);
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) out[k] = D::Widen(tmp[k]);
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) out[k] = D::Widen(e[k]);
}

// LoadK for a dtype known only at run time (a weight or bias, whose dtype may differ from
// the row's): the branch is the same for every thread.
template <int K>
__device__ __forceinline__ void LoadAnyK(int32_t t, const void* p, int64_t base, float* out) {
  if (t == kDevF32) {
    LoadK<kDevF32, K>(p, base, out);
  } else if (t == kDevF16) {
    LoadK<kDevF16, K>(p, base, out);
  } else {
    LoadK<kDevBF16, K>(p, base, out);
  }
}

// Elements before p's first 16-byte boundary, at most n.
template <class E>
__device__ __forceinline__ int64_t HeadElems(const void* p, int64_t n) {
  const int64_t head =
      static_cast<int64_t>((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15) / sizeof(E);
  return head < n ? head : n;
}

// Calls f(i, vals, Count<k>) over the row of n elements of type T at p, the threads of a
// group (lane in [0, width)) sharing it: k = Dev<T>::kVec for the vector body, 1 for the
// head and tail.
template <int T, class F>
__device__ __forceinline__ void ForEachLoadedChunk(const void* p, int64_t n, int lane, int width,
                                                   F&& f) {
  using D = Dev<T>;
  using E = typename D::Elem;
  const E* e = static_cast<const E*>(p);
  const int64_t head = HeadElems<E>(p, n);
  for (int64_t i = lane; i < head; i += width) {
    float v = D::Widen(e[i]);
    f(i, &v, Count<1>{});
  }
  const int64_t vecs = (n - head) / D::kVec;
  const uint4* pv = reinterpret_cast<const uint4*>(e + head);
  auto batch = [&](int64_t v, auto u) {
    constexpr int kU = decltype(u)::value;
    uint4 raw[kU];
#pragma unroll
    for (int q = 0; q < kU; ++q) raw[q] = __ldg(pv + v + q * width);
#pragma unroll
    for (int q = 0; q < kU; ++q) {
      const E* r = reinterpret_cast<const E*>(&raw[q]);
      float vals[D::kVec];
#pragma unroll
      for (int k = 0; k < D::kVec; ++k) vals[k] = D::Widen(r[k]);
      f(head + (v + q * width) * D::kVec, vals, Count<D::kVec>{});
    }
  };
  int64_t v = lane;
  for (; v + 3 * width < vecs; v += 4 * width) batch(v, Count<4>{});
  if (v + width < vecs) {
    batch(v, Count<2>{});
    v += 2 * width;
  }
  for (; v < vecs; v += width) batch(v, Count<1>{});
  for (int64_t i = head + vecs * D::kVec + lane; i < n; i += width) {
    float x = D::Widen(e[i]);
    f(i, &x, Count<1>{});
  }
}

// Stores, for every chunk of the row of n elements of type T at p (16-byte vectors after a
// scalar head, then a scalar tail), the values g(i, out, Count<k>) writes to out[0..k).
template <int T, class G>
__device__ __forceinline__ void ForEachStoredChunk(void* p, int64_t n, int lane, int width, G&& g) {
  using D = Dev<T>;
  using E = typename D::Elem;
  E* e = static_cast<E*>(p);
  const int64_t head = HeadElems<E>(p, n);
  for (int64_t i = lane; i < head; i += width) {
    float v;
    g(i, &v, Count<1>{});
    e[i] = D::Narrow(v);
  }
  const int64_t vecs = (n - head) / D::kVec;
  uint4* pv = reinterpret_cast<uint4*>(e + head);
  for (int64_t v = lane; v < vecs; v += width) {
    float vals[D::kVec];
    g(head + v * D::kVec, vals, Count<D::kVec>{});
    alignas(16) E out[D::kVec];
#pragma unroll
    for (int k = 0; k < D::kVec; ++k) out[k] = D::Narrow(vals[k]);
    pv[v] = *reinterpret_cast<const uint4*>(out);
  }
  for (int64_t i = head + vecs * D::kVec + lane; i < n; i += width) {
    float v;
    g(i, &v, Count<1>{});
    e[i] = D::Narrow(v);
  }
}

// Sum of two doubles over a warp (every lane gets both).
__device__ __forceinline__ double2 WarpSum2(double2 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  return v;
}

// Sum of two doubles over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets both. `scratch` holds 64 doubles; the block must reach this call together.
__device__ __forceinline__ double2 BlockSum2(double2 v, double* scratch) {
  v = WarpSum2(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) {
    scratch[warp] = v.x;
    scratch[32 + warp] = v.y;
  }
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? make_double2(scratch[lane], scratch[32 + lane]) : make_double2(0.0, 0.0);
  return WarpSum2(v);
}

// The threads that share a row: a warp, or the whole block (the block must reach Sum, Sum2
// and Sync together). `scratch` holds 64 doubles (unused by a warp). Sum's `more`: a Sum2
// of the same row follows (ClusterGroup's use; these ignore it).
struct WarpGroup {
  __device__ static double Sum(double v, double*, bool = false) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
  __device__ static double2 Sum2(double2 v, double*) { return WarpSum2(v); }
  __device__ static void Sync() { __syncwarp(); }
};
struct BlockGroup {
  __device__ static double Sum(double v, double* scratch, bool = false) {
    return BlockSum2(make_double2(v, 0.0), scratch).x;
  }
  __device__ static double2 Sum2(double2 v, double* scratch) { return BlockSum2(v, scratch); }
  __device__ static void Sync() { __syncthreads(); }
};

// A chunk's fp32 part of a row's first statistic (values v of indices i..i+K): LayerNorm's
// sum of deviations from the row's first value, else the sum of squares of the values
// before index m (RMSNorm's partial statistics).
template <int K>
__device__ __forceinline__ float ChunkPart(const float* v, bool layer, float first, int64_t i,
                                           int64_t m) {
  float part = 0;
  if (layer) {
#pragma unroll
    for (int k = 0; k < K; ++k) part += v[k] - first;
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (i + k < m) part = __fmaf_rn(v[k], v[k], part);
    }
  }
  return part;
}

// A row's inverse scale from its statistics (docs/semantics.md): LayerNorm's from t, the
// sums of its n deviations from the fp32 shift and of their squares (*dm: the mean's part
// beyond the shift, in fp32); RMSNorm's and L2Norm's from ss, the sum of squares
// (RMSNorm's over its first m values).
__device__ __forceinline__ double LayerScale(const RowSegment& s, double2 t, int64_t n, float* dm) {
  const double d1 = t.x / static_cast<double>(n);
  const double var = fmax(t.y / static_cast<double>(n) - d1 * d1, 0.0);
  *dm = static_cast<float>(d1);
  return s.eps_inside ? 1.0 / sqrt(var + s.eps) : 1.0 / (sqrt(var) + s.eps);
}
__device__ __forceinline__ double SquaresScale(const RowSegment& s, double ss, int64_t m) {
  if (s.kind == 1) {
    const double ms = ss / static_cast<double>(m);
    return s.eps_inside ? 1.0 / sqrt(ms + s.eps) : 1.0 / (sqrt(ms) + s.eps);
  }
  return 1.0 / fmax(sqrt(ss), s.eps);
}

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_ROW_CHUNKS_CUH_
