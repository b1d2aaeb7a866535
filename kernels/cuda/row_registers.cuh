// RegisterRow: one row of a row op held in registers by the threads that share it (a warp,
// a block, or the blocks of a cluster: the Group type sums over them), used by the register
// kernels (row_norm_regs.cu) and the cluster kernel (row_norm_cluster.cu). Every 16-byte
// vector of x a thread holds (at most kV of them, 32 fp32 values a thread) is read from
// global memory once and kept widened in registers through the statistics and the
// epilogue. Same arithmetic as row_norm.cu's: fp32 sums over one vector's elements gathered
// in double, LayerNorm centred on the row's first value then on the fp32 mean, the fp32
// epilogue in the same order.
//
// Thread safety: a device function; each group of threads calls it on its own row.
#ifndef NORMD_KERNELS_CUDA_ROW_REGISTERS_CUH_
#define NORMD_KERNELS_CUDA_ROW_REGISTERS_CUH_

#include "kernels/cuda/row_chunks.cuh"

namespace normd::kernels::cuda {

// Row r of segment s by `width` threads (lane in [0, width)), kV vectors of x a thread.
template <class Group, int XT, int YT, int kV>
__device__ __forceinline__ void RegisterRow(const RowSegment& s, int64_t r, int lane, int width,
                                            double* scratch) {
  using X = Dev<XT>;
  using XE = typename X::Elem;
  using YE = typename Dev<YT>::Elem;
  constexpr int kVec = X::kVec;
  const int64_t n = s.cols;
  const int nv = static_cast<int>(n / kVec);
  const XE* x = static_cast<const XE*>(s.x) + r * n;
  const XE* skip = s.skip ? static_cast<const XE*>(s.skip) + r * n : nullptr;
  const float alpha = s.alpha;
  const bool add_then_norm = s.residual == 1;
  const bool layer = s.kind == 0;
  const int64_t m = s.partial_m;

  // Every load of the row first, then the widening: kV (twice kV with a skip) 16-byte loads
  // in flight a thread.
  float v[kV][kVec];
  {
    uint4 raw[kV], sk[kV];
#pragma unroll
    for (int q = 0; q < kV; ++q) {
      const int j = lane + q * width;
      raw[q] = j < nv ? __ldg(reinterpret_cast<const uint4*>(x) + j) : make_uint4(0, 0, 0, 0);
      if (add_then_norm) {
        sk[q] = j < nv ? __ldg(reinterpret_cast<const uint4*>(skip) + j) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int q = 0; q < kV; ++q) {
      const XE* e = reinterpret_cast<const XE*>(&raw[q]);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[q][k] = X::Widen(e[k]);
      if (add_then_norm) {
        const XE* f = reinterpret_cast<const XE*>(&sk[q]);
#pragma unroll
        for (int k = 0; k < kVec; ++k) v[q][k] = __fmaf_rn(alpha, X::Widen(f[k]), v[q][k]);
      }
    }
  }

  // LayerNorm's first shift: the row's first value, formed as every thread's h is.
  float first = 0;
  if (layer) {
    first = X::Widen(x[0]);
    if (add_then_norm) first = __fmaf_rn(alpha, X::Widen(skip[0]), first);
  }
  double acc = 0;
#pragma unroll
  for (int q = 0; q < kV; ++q) {
    const int j = lane + q * width;
    if (j < nv) acc += ChunkPart<kVec>(v[q], layer, first, static_cast<int64_t>(j) * kVec, m);
  }

  double scale;
  float shift = 0, dm = 0;  // LayerNorm: mean = shift + dm, shift in fp32
  if (layer) {
    const double s1 = Group::Sum(acc, scratch, /*more=*/true);
    shift = static_cast<float>(first + s1 / static_cast<double>(n));
    double2 c = make_double2(0.0, 0.0);
#pragma unroll
    for (int q = 0; q < kV; ++q) {
      if (lane + q * width >= nv) continue;
      double p1 = 0;  // exact differences, summed in double, as RowWork's (row_norm.cu)
      float p2 = 0;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float d = v[q][k] - shift;
        p1 += static_cast<double>(v[q][k]) - static_cast<double>(shift);
        p2 = __fmaf_rn(d, d, p2);
      }
      c.x += p1;
      c.y += p2;
    }
    scale = LayerScale(s, Group::Sum2(c, scratch), n, &dm);
  } else {
    scale = SquaresScale(s, Group::Sum(acc, scratch), m);
  }
  const float sc = static_cast<float>(scale);

  XE* h = s.h ? static_cast<XE*>(s.h) + r * n : nullptr;
  YE* y = static_cast<YE*>(s.y) + r * n;
  const bool cast_before_weight = s.kind == 1 && s.cast_before_weight;
  const bool then_add = s.residual == 2;
#pragma unroll
  for (int q = 0; q < kV; ++q) {
    const int j = lane + q * width;
    if (j >= nv) continue;
    const int64_t base = static_cast<int64_t>(j) * kVec;
    if (h) {
      alignas(16) XE out[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) out[k] = X::Narrow(v[q][k]);
      reinterpret_cast<uint4*>(h)[j] = *reinterpret_cast<const uint4*>(out);
    }
    float w[kVec], b[kVec], sk[kVec];
    if (s.weight) LoadAnyK<kVec>(s.w_dtype, s.weight, base, w);
    if (s.bias) LoadAnyK<kVec>(s.b_dtype, s.bias, base, b);
    if (then_add) LoadK<XT, kVec>(skip, base, sk);
    // kVec outputs of y's dtype: 8, 16 or 32 bytes, aligned to their size (up to 16).
    alignas(16) YE out[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float t = layer ? ((v[q][k] - shift) - dm) * sc : v[q][k] * sc;
      if (cast_before_weight) t = X::Widen(X::Narrow(t));
      if (s.weight) t *= w[k] + s.w_offset;
      if (s.bias) t += b[k];
      if (then_add) t = __fmaf_rn(alpha, sk[k], t);
      out[k] = Dev<YT>::Narrow(t);
    }
    constexpr int kOutBytes = kVec * static_cast<int>(sizeof(YE));
    if constexpr (kOutBytes == 8) {
      reinterpret_cast<uint2*>(y + base)[0] = *reinterpret_cast<const uint2*>(out);
    } else {
#pragma unroll
      for (int u = 0; u < kOutBytes / 16; ++u) {
        reinterpret_cast<uint4*>(y + base)[u] = reinterpret_cast<const uint4*>(out)[u];
      }
    }
  }
}

}  // namespace normd::kernels::cuda

#endif  // NORMD_KERNELS_CUDA_ROW_REGISTERS_CUH_
