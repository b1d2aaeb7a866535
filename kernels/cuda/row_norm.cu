// The CUDA row kernel that stages rows in shared memory: LayerNorm, RMSNorm (offset,
// partial, cast_before_weight), L2Norm and their residual fusions over a ragged batch of
// segments, one launch per kind and dtype pair (RowLaunch), for the rows that the register
// kernel (row_norm_regs.cu) does not take: long, unaligned or ragged-width rows. Each block
// takes one RowItem: up to 8 rows of at most kWarpRowMaxCols, a warp each, or one longer
// row for the whole block. A row's element types are template parameters, chosen once per
// row; the weight and bias are read in their own dtype (no widening launch before the
// kernel: a call is one launch).
//
// The row is read from global memory once (16-byte vector loads, several in flight per
// thread), widened to fp32 (h formed in fp32 with one rounding) into shared memory, and
// its statistics summed as on the CPU (docs/semantics.md, Accuracy): fp32 sums over one
// vector's elements, gathered in double. LayerNorm sums the deviations from the row's
// first element, then, from shared memory, the deviations from that mean rounded to fp32
// and their squares: the variance comes from sums centred within an fp32 rounding of the
// mean, whatever the data's offset. The epilogue runs in fp32. Rows longer than shared
// memory holds stage what fits and read the rest again from global memory (L2).
#include <algorithm>
#include <atomic>

#include "kernels/cuda/row_chunks.cuh"

namespace normd::kernels::cuda {
namespace {

// One row (index r of segment s) by a group of `width` threads; buf stages its first
// `cap` values in fp32 (buf may be null, cap 0).
template <class Group, int XT, int YT>
__device__ void RowWork(const RowSegment& s, int64_t r, float* buf, int64_t cap, int lane,
                        int width, double* scratch) {
  using X = Dev<XT>;
  using XE = typename X::Elem;
  const int64_t n = s.cols;
  const XE* x = static_cast<const XE*>(s.x) + r * n;
  const XE* skip = s.skip ? static_cast<const XE*>(s.skip) + r * n : nullptr;
  auto* y = static_cast<typename Dev<YT>::Elem*>(s.y) + r * n;
  XE* h = s.h ? static_cast<XE*>(s.h) + r * n : nullptr;
  const float alpha = s.alpha;
  const bool add_then_norm = s.residual == 1;
  const bool layer = s.kind == 0;
  const int64_t m = s.partial_m;
  if (buf == nullptr || cap > n) cap = buf == nullptr ? 0 : n;

  // The normalized quantity from x's values at i..i+K: x, or h = alpha * skip + x.
  auto add_skip = [&](int64_t i, float* v, auto kc) {
    constexpr int K = decltype(kc)::value;
    if (!add_then_norm) return;
    float sk[K];
    LoadK<XT, K>(skip, i, sk);
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = __fmaf_rn(alpha, sk[k], v[k]);
  };
  // The normalized quantity at i..i+K, from buf where staged.
  auto values = [&](int64_t i, float* v, auto kc) {
    constexpr int K = decltype(kc)::value;
    if (i + K <= cap) {
      if constexpr (K % 4 == 0) {
        if ((i & 3) == 0) {
#pragma unroll
          for (int q = 0; q < K / 4; ++q) {
            const float4 t = reinterpret_cast<const float4*>(buf + i)[q];
            v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
          }
          return;
        }
      }
#pragma unroll
      for (int k = 0; k < K; ++k) v[k] = buf[i + k];
      return;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (i + k < cap) {
        v[k] = buf[i + k];
      } else {
        v[k] = X::Widen(x[i + k]);
        add_skip(i + k, v + k, Count<1>{});
      }
    }
  };

  // LayerNorm's first shift: the row's first value.
  float first = 0;
  if (layer) {
    first = X::Widen(x[0]);
    add_skip(0, &first, Count<1>{});
  }
  double acc = 0;
  ForEachLoadedChunk<XT>(x, n, lane, width, [&](int64_t i, float* v, auto kc) {
    constexpr int K = decltype(kc)::value;
    add_skip(i, v, kc);
    if (i + K <= cap && (K == 1 || (i & 3) == 0)) {
      if constexpr (K % 4 == 0) {
#pragma unroll
        for (int q = 0; q < K / 4; ++q) {
          reinterpret_cast<float4*>(buf + i)[q] =
              make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
        }
      } else {
        buf[i] = v[0];
      }
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (i + k < cap) buf[i + k] = v[k];
      }
    }
    acc += ChunkPart<K>(v, layer, first, i, m);
  });

  double scale;
  float shift = 0, dm = 0;  // LayerNorm: mean = shift + dm, shift in fp32
  if (layer) {
    const double s1 = Group::Sum(acc, scratch);
    shift = static_cast<float>(first + s1 / static_cast<double>(n));
    Group::Sync();  // every lane's buf entries are visible to every other lane
    double2 c = make_double2(0.0, 0.0);
    auto centred = [&](const float* v, auto kc) {
      constexpr int K = decltype(kc)::value;
      // The deviations' sum in double from exact differences: fp32 roundings of v - shift
      // lean one way when most values sit on one side of the shift, and dm would carry them.
      double p1 = 0;
      float p2 = 0;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const float d = v[k] - shift;
        p1 += static_cast<double>(v[k]) - static_cast<double>(shift);
        p2 = __fmaf_rn(d, d, p2);
      }
      c.x += p1;
      c.y += p2;
    };
    const int64_t quads = cap / 4;
    for (int64_t q = lane; q < quads; q += width) {
      const float4 t = reinterpret_cast<const float4*>(buf)[q];
      const float v[4] = {t.x, t.y, t.z, t.w};
      centred(v, Count<4>{});
    }
    for (int64_t i = quads * 4 + lane; i < n; i += width) {
      float v;
      values(i, &v, Count<1>{});
      centred(&v, Count<1>{});
    }
    scale = LayerScale(s, Group::Sum2(c, scratch), n, &dm);
  } else {
    scale = SquaresScale(s, Group::Sum(acc, scratch), m);
  }
  Group::Sync();  // every lane's buf entries are visible to every other lane
  const float sc = static_cast<float>(scale);

  if (h) {
    ForEachStoredChunk<XT>(h, n, lane, width,
                           [&](int64_t i, float* out, auto kc) { values(i, out, kc); });
  }
  const bool cast_before_weight = s.kind == 1 && s.cast_before_weight;
  const bool then_add = s.residual == 2;
  ForEachStoredChunk<YT>(y, n, lane, width, [&](int64_t i, float* out, auto kc) {
    constexpr int K = decltype(kc)::value;
    float v[K], w[K], b[K], sk[K];
    values(i, v, kc);
    if (s.weight) LoadAnyK<K>(s.w_dtype, s.weight, i, w);
    if (s.bias) LoadAnyK<K>(s.b_dtype, s.bias, i, b);
    if (then_add) LoadK<XT, K>(skip, i, sk);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float t = layer ? ((v[k] - shift) - dm) * sc : v[k] * sc;
      if (cast_before_weight) t = X::Widen(X::Narrow(t));
      if (s.weight) t *= w[k] + s.w_offset;
      if (s.bias) t += b[k];
      if (then_add) t = __fmaf_rn(alpha, sk[k], t);
      out[k] = t;
    }
  });
}

// stage_floats: each warp row's staging floats (warp rows), or the values of a block row
// staged in shared memory (block rows; 0: none); a multiple of 4. One kernel per kind and
// dtype pair (RowLaunch): each is register-allocated for its own path alone.
// At least three blocks to an SM (80 registers a thread; 64 spill): while one block reduces
// or writes, the others keep loads in flight.
template <bool kWarpRows, int XT, int YT>
__global__ void __launch_bounds__(kRowBlockThreads, 3)
    RowNormKernel(const RowSegment* segments, const RowItem* items, int64_t stage_floats) {
  extern __shared__ float4 smem4[];
  __shared__ double scratch[64];
  float* smem = reinterpret_cast<float*>(smem4);
  const RowItem item = items[blockIdx.x];
  const RowSegment& s = segments[item.segment];
  if constexpr (kWarpRows) {
    const int warp = threadIdx.x / 32;
    if (warp < item.count) {
      RowWork<WarpGroup, XT, YT>(s, item.first_row + warp, smem + warp * stage_floats, s.cols,
                                 threadIdx.x % 32, 32, scratch);
    }
  } else {
    RowWork<BlockGroup, XT, YT>(s, item.first_row, stage_floats > 0 ? smem : nullptr, stage_floats,
                                threadIdx.x, blockDim.x, scratch);
  }
}

using RowKernel = void (*)(const RowSegment*, const RowItem*, int64_t);

template <bool kWarpRows, int XT>
constexpr RowKernel KernelFor(int32_t y) {
  return y == kDevF32   ? RowNormKernel<kWarpRows, XT, kDevF32>
         : y == kDevF16 ? RowNormKernel<kWarpRows, XT, kDevF16>
                        : RowNormKernel<kWarpRows, XT, kDevBF16>;
}
template <bool kWarpRows>
RowKernel KernelFor(int32_t x, int32_t y) {
  return x == kDevF32   ? KernelFor<kWarpRows, kDevF32>(y)
         : x == kDevF16 ? KernelFor<kWarpRows, kDevF16>(y)
                        : KernelFor<kWarpRows, kDevBF16>(y);
}

constexpr int kMaxDevices = 64;

// The largest dynamic shared memory a block of the row kernels may have on the current
// device; set on `kernel` (one of the 18, index `k`) once per device.
cudaError_t MaxSmemBytes(RowKernel kernel, int k, int64_t* bytes) {
  static std::atomic<int64_t> usable_of[kMaxDevices] = {};
  static std::atomic<uint32_t> set_on[kMaxDevices] = {};  // bit k: kernel k's attribute set
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const bool cached = device >= 0 && device < kMaxDevices;
  int64_t usable = cached ? usable_of[device].load() : 0;
  if (usable == 0) {
    int optin = 0;
    e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e != cudaSuccess) return e;
    // The static scratch (512 bytes) and the runtime's reserve: 1 KiB below the opt-in.
    usable = (static_cast<int64_t>(optin) - 1024) / 16 * 16;
    if (cached) usable_of[device].store(usable);
  }
  if (!cached || (set_on[device].load() & (1u << k)) == 0) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(usable));
    if (e != cudaSuccess) return e;
    if (cached) set_on[device].fetch_or(1u << k);
  }
  *bytes = usable;
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchRowNorm(const RowSegment* segments, const RowItem* items, const RowLaunch& launch,
                          cudaStream_t stream) {
  if (launch.count == 0) return cudaSuccess;
  if (launch.cluster > 1) return LaunchClusterRows(segments, items, launch, stream);
  if (launch.vectors > 0) return LaunchRegisterRows(segments, items, launch, stream);
  const RowKernel kernel = launch.warp_rows ? KernelFor<true>(launch.x_dtype, launch.y_dtype)
                                            : KernelFor<false>(launch.x_dtype, launch.y_dtype);
  const int k = (launch.warp_rows * 3 + launch.x_dtype) * 3 + launch.y_dtype;
  int64_t limit = 0;
  const cudaError_t e = MaxSmemBytes(kernel, k, &limit);
  if (e != cudaSuccess) return e;
  const int64_t cols = (launch.max_cols + 3) / 4 * 4;
  // Warp rows: eight rows' staging; block rows longer than what fits stage their first part
  // and read the rest twice.
  const int64_t stage_floats = launch.warp_rows ? cols : std::min(cols, limit / 16 * 4);
  const int64_t floats = launch.warp_rows ? 8 * stage_floats : stage_floats;
  kernel<<<launch.count, kRowBlockThreads, floats* static_cast<int64_t>(sizeof(float)), stream>>>(
      segments, items + launch.first, stage_floats);
  return cudaGetLastError();
}

}  // namespace normd::kernels::cuda
